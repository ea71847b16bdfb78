"""What a trace puts in the graph at each detail level, checked against its analysis (no database)."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.types import CATEGORIES
from bottleneck_oracle.graphdb.tables import critical_nodes, expand_hops, graph_tables, step_key
from bottleneck_oracle.graphdb.types import Detail
from bottleneck_oracle.traces import EventKind, read_trace
from tests.conftest import WILD
from tests.graphdb.conftest import LoadedTrace
from tests.whatif.cases import fault


@pytest.fixture(scope="module")
def dlrm(analyses: dict[str, LoadedTrace]) -> LoadedTrace:
    return analyses["dlrm_8rank_kineto"]


def test_full_detail_has_every_node_and_edge(dlrm: LoadedTrace) -> None:
    g = dlrm.analysis.graph
    phases = dict(graph_tables(dlrm.analysis, "t").phases)
    assert len(phases["load_ops"]) + len(phases.get("load_loose_ops", [])) == len(g)
    assert sum(len(t) for n, t in phases.items() if n.startswith("load_edges_")) == len(g.edge_src)
    assert len(phases["load_critical_next"]) == sum(len(r.path_node) for r in dlrm.analysis.steps)


def test_critical_detail_keeps_paths_hops_and_collective_members(dlrm: LoadedTrace) -> None:
    a = dlrm.analysis
    one, two = (graph_tables(a, "t", Detail.CRITICAL, hops) for hops in (1, 2))
    path = critical_nodes(a.steps)
    assert one.loaded[path].all() and one.loaded[a.graph.collective >= 0].all()
    assert np.array_equal(one.loaded, expand_hops(a, path, 1) | (a.graph.collective >= 0))
    assert one.loaded.sum() < two.loaded.sum() < len(a.graph)
    edges = dict(one.phases)["load_edges_nest"].columns
    assert one.loaded[edges["src"]].all() and one.loaded[edges["dst"]].all()


def test_summary_detail_has_no_ops(dlrm: LoadedTrace) -> None:
    tables = graph_tables(dlrm.analysis, "t", Detail.SUMMARY)
    assert [name for name, _ in tables.phases] == ["load_ranks", "load_steps", "load_findings", "load_explains"]
    steps = dict(tables.phases)["load_steps"].columns
    assert all(len(top) == len(us) > 0 for top, us in zip(steps["top_ops"], steps["top_ops_us"]))


def test_step_rows_sum_their_attribution_to_the_wall_time(dlrm: LoadedTrace) -> None:
    steps = dict(graph_tables(dlrm.analysis, "t", Detail.SUMMARY).phases)["load_steps"].columns
    for i, wall in enumerate(steps["wall_ms"]):
        assert sum(steps[f"{c.value}_ms"][i] for c in CATEGORIES) == pytest.approx(wall, abs=0.01)


def test_critical_next_chains_each_path_from_its_step(dlrm: LoadedTrace) -> None:
    cols = dict(graph_tables(dlrm.analysis, "t").phases)["load_critical_next"].columns
    report = dlrm.analysis.steps[0]
    k = len(report.path_node)
    key = step_key("t", report.step, report.rank)
    assert cols["path"][:k] == [key] * k and cols["pos"][:k] == list(range(k)) and cols["src"][0] is None
    assert cols["src"][1:k] == cols["dst"][: k - 1]  # each segment starts where the previous one ended
    assert all((d is None) == gap for d, gap in zip(cols["dst"][:k], cols["gap"][:k]))


def test_plan_changes_with_detail_and_batch_size(dlrm: LoadedTrace) -> None:
    full = graph_tables(dlrm.analysis, "t")
    assert full.plan(1000) == graph_tables(dlrm.analysis, "t").plan(1000)
    assert full.plan(1000) != full.plan(2000) != graph_tables(dlrm.analysis, "t", Detail.SUMMARY).plan(2000)
    batches = [sum(1 for _ in full.batches(5000, part)) for part in range(len(full.parts))]
    assert batches == full.batch_counts(5000)
    assert sum(batches) >= sum(-(-len(t) // 5000) for _, t in full.phases)  # a phase split in parts splits its batches


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    """The time a list of intervals covers, by a plain sweep (no project code)."""
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def _gpu_trace(name: str) -> Analysis:
    return analyze(read_trace([WILD / "tracelens" / "h100" / name / "trace.json.gz"]))


def test_step_rows_carry_what_the_gpu_did_in_the_step() -> None:
    for name, bound in (("qwen1.5_0.5b_chat", True), ("bert_small", False)):
        a = _gpu_trace(name)
        cols = dict(graph_tables(a, "t", Detail.SUMMARY).phases)["load_steps"].columns
        ev, table = a.graph.trace.events, a.graph.steps
        gpu = np.isin(ev.kind, (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET))
        for i, (step, rank) in enumerate(zip(cols["step"], cols["rank"])):
            row = next(j for j in range(len(table)) if (table.step[j], table.rank[j]) == (step, rank))
            lo, hi = int(table.start_ns[row]), int(table.end_ns[row])
            ends = ev.start_ns + ev.dur_ns
            mine = np.flatnonzero(gpu & (ev.rank == rank) & (ends > lo) & (ev.start_ns < hi))
            busy = _union_ns([(max(int(ev.start_ns[k]), lo), min(int(ends[k]), hi)) for k in mine.tolist()])
            assert cols["gpu_busy_ms"][i] == pytest.approx(busy / 1e6, abs=1e-5)
            assert cols["gpu_busy_ms"][i] + cols["gpu_idle_ms"][i] == pytest.approx(cols["wall_ms"][i], abs=2e-3)
            assert cols["gpu_busy_pct"][i] == pytest.approx(100 * busy / (hi - lo), abs=0.06)
            assert cols["gpu_bound"][i] is bound and (cols["gpu_evidence"][i] is not None) is bound
            assert bool(cols["gpu_op_classes"][i]) is bound
            assert len(cols["gpu_op_classes"][i]) == len(cols["gpu_op_classes_ms"][i])
            assert sum(cols["gpu_op_classes_ms"][i]) <= cols["gpu_busy_ms"][i] + 1e-3  # one stream: no overlap
        assert cols["gpu_busy_pct"][0] >= 75 if bound else cols["gpu_busy_pct"][0] < 75


def test_step_rows_of_a_trace_without_gpu_work_have_no_gpu_values(analyses: dict[str, LoadedTrace]) -> None:
    cols = dict(graph_tables(analyses["gpt_2rank"].analysis, "t", Detail.SUMMARY).phases)["load_steps"].columns
    for name in ("gpu_busy_ms", "gpu_idle_ms", "gpu_busy_pct", "gpu_bound", "gpu_evidence"):
        assert set(cols[name]) == {None}, name


def test_ranks_waiting_in_a_collective_for_a_paused_peer_are_not_gpu_bound() -> None:
    _, a = fault("host_pause")  # a 4-rank GPU job: one rank pauses, the others' all-reduce kernels wait
    cols = dict(graph_tables(a, "t", Detail.SUMMARY).phases)["load_steps"].columns
    waiting = [i for i, pct in enumerate(cols["gpu_busy_pct"]) if pct >= 75]
    assert waiting, "the waiting ranks' GPUs look busy: their collective kernels run the whole pause"
    for i in waiting:
        assert cols["gpu_exposed_comm_ms"][i] > 0.5 * cols["wall_ms"][i] and cols["gpu_bound"][i] is False
