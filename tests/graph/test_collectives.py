"""Gloo collectives on CPU: c10d call ↔ gloo op on its worker thread, matched across ranks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.graph import EdgeType, NodeKind, build_graph
from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.collectives import collective_arrivals
from bottleneck_oracle.graph.types import Bottleneck, Category
from bottleneck_oracle.traces import read_trace
from tests.analysis.synth_cases import synth_case
from tests.tracebuilder import op, step, write

DIMS = {"Input Dims": [[[1000]], [], []]}


def _gloo_rank(call_ms: float, cat: str = "user_annotation") -> list[dict]:
    # the main thread enqueues the all-reduce, then waits (an uncovered gap) until the gloo worker
    # finishes at 40 ms; the worker's op starts right after the call
    call = call_ms * 1000
    return [
        step(1, 0, 50_000),
        op("aten::mm", 1_000, call - 1_500),
        op("c10d::allreduce_", call, 50, **DIMS),
        op("gloo:all_reduce", call + 100, 40_000 - call - 100, tid=2, cat=cat,
           **{"Input Dims": [[1000]]}),
        op("aten::add", 40_060, 5_000),
    ]


@pytest.fixture(params=["user_annotation", "cpu_op"])
def gloo_job(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    # PyTorch 1.10-1.12 recorded gloo ops as cpu_op (Kineto tb_plugin's distributed samples)
    write(tmp_path / "job" / "rank0.json.gz", _gloo_rank(5, request.param), rank=0, world=2)
    write(tmp_path / "job" / "rank1.json.gz", _gloo_rank(30, request.param), rank=1, world=2)
    return tmp_path / "job"


def test_gloo_ops_pair_with_their_c10d_call_and_match_across_ranks(gloo_job: Path) -> None:
    g = build_graph(read_trace(gloo_job))
    names = np.array([g.node_name(i) for i in range(len(g))])
    gloo = np.flatnonzero(names == "gloo:all_reduce")
    assert (g.kind[gloo] == NodeKind.COMM).all()
    src, dst = g.edges_of(EdgeType.LAUNCH)
    assert sorted(zip(names[src], names[dst])) == [("c10d::allreduce_", "gloo:all_reduce")] * 2
    (arrival,) = collective_arrivals(g)
    assert arrival.kind == "allreduce" and arrival.last_rank == 1
    assert arrival.lateness_ns == 25_000_000
    # the main thread resumed because the gloo op ended
    src, dst = g.edges_of(EdgeType.SYNC)
    assert {(names[s], names[d]) for s, d in zip(src, dst)} >= {("gloo:all_reduce", "aten::add")}


def test_gloo_wait_is_communication_and_the_late_rank_is_named(gloo_job: Path) -> None:
    a = analyze(read_trace(gloo_job))
    r0, r1 = a.steps
    # rank 0's 35 ms wait in the gap after its call is not idle: its path runs on rank 1 then, whose
    # 1.5 ms of gaps are communication and 28.6 ms of ops cpu; rank 0's own gloo op adds 9.96 ms of
    # communication; the only idle time is the 4.94 ms after aten::add, before the step ends
    assert r0.breakdown_ns[Category.COMMUNICATION] == 1_500_000 + 9_960_000
    assert r0.breakdown_ns[Category.CPU] == 28_500_000 + 100_000 + 5_000_000
    assert r0.breakdown_ns[Category.IDLE] == 4_940_000
    assert 1 in r0.path_rank.tolist()
    (straggler,) = [f for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK]
    assert straggler.ranks == (1,) and straggler.step == 1


def _late_closing_rank(call_ms: float, close_late_us: float, resume_us: float = 40_060) -> list[dict]:
    # as _gloo_rank, but the worker closes its span ``close_late_us`` after the main thread went on
    call = call_ms * 1000
    return [
        step(1, 0, 50_000),
        op("aten::mm", 1_000, call - 1_500),
        op("c10d::allreduce_", call, 50, **DIMS),
        op("gloo:all_reduce", call + 100, 40_060 + close_late_us - call - 100, tid=2, cat="user_annotation",
           **{"Input Dims": [[1000]]}),
        op("aten::add", max(resume_us, call + 150), 5_000),
    ]


# (when rank 1 calls, how late the spans close after rank 0's main thread went on at 40.06 ms, tied):
# 0.3 ms late, and 3 ms (a loaded machine schedules the workers late: 3.7 ms was seen), both after every
# member had arrived (30.1 ms), are the collective's completion; a resume before rank 1 arrived (40.1
# ms) is not, however soon the spans close after it
@pytest.mark.parametrize("call_ms, late_us, tied", [(30, 300, True), (30, 3_000, True), (40, 3_000, False)])
def test_a_gloo_span_that_closes_after_its_waiter_went_on_ends_there(tmp_path: Path, call_ms: float, late_us: int,
                                                                       tied: bool) -> None:
    from bottleneck_oracle.replay.engine import Edit, replay

    write(tmp_path / "job" / "rank0.json.gz", _late_closing_rank(5, late_us), rank=0, world=2)
    write(tmp_path / "job" / "rank1.json.gz", _late_closing_rank(call_ms, late_us), rank=1, world=2)
    a = analyze(read_trace(tmp_path / "job"))
    g = a.graph
    names = np.array([g.node_name(i) for i in range(len(g))])
    gloo = np.flatnonzero(names == "gloo:all_reduce")
    src, dst = g.edges_of(EdgeType.SYNC)
    resumed = {int(g.rank[d]) for s, d in zip(src, dst) if (names[s], names[d]) == ("gloo:all_reduce", "aten::add")}
    assert (0 in resumed) == tied
    if tied:  # the data was there when the main thread went on, before the span closed
        assert (g.end_ns[gloo] == 40_060_000).all()
        # rank 1's late matmul held rank 0 in the collective: half of it gives rank 0 back 14 ms
        r = replay(a, [Edit(2.0, name="^aten::mm$", ranks=(1,))])
        gain_ms = (r.before_ns - r.after_ns)[r.rank == 0][0] / 1e6
        assert gain_ms == pytest.approx(14.25, abs=0.1)


def _two_buckets() -> list[dict]:
    # two all-reduces in flight on two workers, every rank arrived at both by 6.1 ms; the main thread
    # waits for the first (done at 20 ms), copies it out, then waits for the second (done at 35 ms)
    return [
        step(1, 0, 50_000),
        op("aten::mm", 1_000, 3_000),
        op("c10d::allreduce_", 5_000, 50, **DIMS),
        op("gloo:all_reduce", 5_100, 14_900, tid=2, cat="user_annotation", **{"Input Dims": [[1000]]}),
        op("c10d::allreduce_", 6_000, 50, **DIMS),
        op("gloo:all_reduce", 6_100, 28_900, tid=3, cat="user_annotation", **{"Input Dims": [[1000]]}),
        op("aten::copy_", 20_060, 940),
        op("aten::add", 35_060, 5_000),
    ]


def test_a_resume_that_another_collective_explains_does_not_end_a_later_one(tmp_path: Path) -> None:
    """The main thread went on at 20.06 ms, after every member of the second all-reduce had arrived and
    before it ended: but the first all-reduce had just completed, which is why it went on."""
    for rank in (0, 1):
        write(tmp_path / "job" / f"rank{rank}.json.gz", _two_buckets(), rank=rank, world=2)
    g = build_graph(read_trace(tmp_path / "job"))
    names = np.array([g.node_name(i) for i in range(len(g))])
    gloo = np.flatnonzero(names == "gloo:all_reduce")
    assert sorted(set(g.end_ns[gloo].tolist())) == [20_000_000, 35_000_000]
    src, dst = g.edges_of(EdgeType.SYNC)
    assert {(names[s], names[d], int(g.end_ns[s])) for s, d in zip(src, dst) if names[s] == "gloo:all_reduce"} == {
        ("gloo:all_reduce", "aten::copy_", 20_000_000), ("gloo:all_reduce", "aten::add", 35_000_000)}


def test_a_rank_late_by_its_own_wait_passes_the_lateness_on() -> None:
    a, _ = synth_case("tiny", dp=2, tp=2, pp=2, microbatches=2, inject="straggler_rank@2:1=40ms")
    late = [c for c in collective_arrivals(a.graph) if c.step == 2 and c.lateness_ns >= 10e6]
    assert {c.last_rank for c in late} > {1}  # its peers reached their own all-reduces late too
    for c in late:  # but only rank 1 made its lateness; the others had waited as long for it
        assert (c.own_ns >= 10e6) == (c.last_rank == 1), c
        assert c.relayed_ns == 0 if c.last_rank == 1 else c.relayed_ns >= c.lateness_ns - 2e6
