"""Step windows tile each rank's timeline when the CPU runs ahead of the GPU; ``steps_from`` steps."""

from __future__ import annotations

import gzip
import json
from bisect import bisect_right
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.types import Category, NodeKind
from bottleneck_oracle.replay.engine import Edit, replay
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL
from tests.analysis.real_cases import REAL_FOLDERS, real_case
from tests.tracebuilder import kernel, op, runtime, step, write

_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _run_ahead_job(tmp_path: Path, ranks: int = 2, backlog: bool = False, late_orphan: bool = False) -> Analysis:
    """4 steps per rank; each step's CPU takes 10 ms to launch 30 ms of kernels and never waits."""
    for r in range(ranks):
        events = []
        gpu_free = 21_105.0 if backlog else 0.0
        for k in range(4):
            t0 = 100 + k * 10_000 + r * 500
            events.append(step(k + 1, t0, 10_000))
            for i in range(3):
                corr = 1 + k * 3 + i
                ts = t0 + 1_000 + i * 3_000
                events.append(runtime("cudaLaunchKernel", ts, 20, corr=corr))
                gpu_free = max(gpu_free, ts + 5)  # one stream, kernels back to back once queued
                events.append(kernel(f"gemm_{k}_{i}", gpu_free, 10_000, corr=corr))
                gpu_free += 10_000
        if backlog:  # an earlier step's kernels, launched before the recording began: no launch call
            events += [kernel("queued", 1_105 + 10_000 * i, 10_000, corr=900 + i) for i in range(2)]
        if late_orphan:  # a kernel whose launch record the profiler dropped, after the last step's
            events.append(kernel("unrecorded_launch", 200_000, 5, corr=999))
        write(tmp_path / f"rank{r}.json.gz", events, rank=r, world=ranks)
    return analyze(read_trace(tmp_path))


def _walls(a: Analysis, rank: int) -> dict[int, float]:
    return {r.step: r.wall_ns / 1e6 for r in a.steps if r.rank == rank}


def _assert_tiles(a: Analysis, rank: int) -> None:
    st = a.graph.steps
    rows = np.flatnonzero(st.rank == rank)
    rows = rows[np.argsort(st.cpu_start_ns[rows])]
    walls = sum(r.wall_ns for r in a.steps if r.rank == rank)
    span = int(st.end_ns[rows].max() - st.start_ns[rows[0]])
    assert walls == pytest.approx(span, rel=0.005)
    assert (st.start_ns[rows[1:]] >= np.maximum.accumulate(st.end_ns[rows])[:-1]).all()  # no overlap


def test_windows_tile_a_gpu_job_whose_cpu_runs_ahead(tmp_path: Path) -> None:
    a = _run_ahead_job(tmp_path)
    for rank in (0, 1):
        walls = _walls(a, rank)
        # step 1 waits for its own kernels (31 ms after its start); each later step is its 30 ms of GPU work
        assert walls[1] == pytest.approx(31.0, abs=0.05)
        assert [walls[s] for s in (2, 3, 4)] == pytest.approx([30.0] * 3, abs=0.05)
        _assert_tiles(a, rank)
    st = a.graph.steps
    assert (st.start_ns[st.step > 1] > st.cpu_start_ns[st.step > 1]).all()  # the windows opened late
    for r in a.steps:  # the critical path and the replay are those of the window
        assert sum(r.breakdown_ns.values()) == r.wall_ns
        assert r.breakdown_ns[Category.GPU_COMPUTE] >= 0.9 * r.wall_ns
    result = replay(a, [])
    assert result.before_ns.tolist() == [r.wall_ns for r in a.steps]
    # 10x faster kernels leave the CPU the bottleneck: each replayed window is the step's 10 ms CPU
    # range again, not the distance from the previous step's (now early) last kernel
    faster = replay(a, [Edit(10.0, kinds=(NodeKind.KERNEL,))])
    assert (faster.after_ns / 1e6).tolist() == pytest.approx([10.0] * 8, abs=0.05)


def test_gpu_work_queued_before_the_trace_opens_the_first_window(tmp_path: Path) -> None:
    a = _run_ahead_job(tmp_path, ranks=1, backlog=True)
    g = a.graph
    queued = np.array([g.node_name(i) == "queued" for i in range(len(g))])
    assert (g.step_row[queued] == -1).all()  # an earlier step's, not step 1's
    st = g.steps
    first = int(np.flatnonzero(st.step == 1)[0])
    assert st.start_ns[first] == g.end_ns[queued].max() > st.cpu_start_ns[first]
    assert _walls(a, 0)[1] == pytest.approx(30.0, abs=0.05)


def test_a_dropped_launch_record_later_on_the_stream_leaves_the_backlog_one(tmp_path: Path) -> None:
    a = _run_ahead_job(tmp_path, ranks=1, backlog=True, late_orphan=True)
    g = a.graph
    queued = np.array([g.node_name(i) == "queued" for i in range(len(g))])
    assert (g.step_row[queued] == -1).all()
    assert _walls(a, 0) == pytest.approx(_walls(_run_ahead_job(tmp_path / "plain", ranks=1, backlog=True), 0))
    assert not a.slow_steps


def test_a_window_opens_at_the_previous_steps_completion(tmp_path: Path) -> None:
    # K, launched in step 1, runs on into step 2's CPU range
    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 90, 5, corr=1), step(2, 100, 100),
              op("aten::add", 120, 10), kernel("K", 95, 60, corr=1)]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    st = a.graph.steps
    assert st.cpu_start_ns.tolist() == [0, 100_000]
    assert st.start_ns.tolist() == [0, 155_000]
    assert [r.wall_ns for r in a.steps] == [155_000, 45_000]


def test_a_step_done_before_the_previous_one_gets_an_empty_window(tmp_path: Path) -> None:
    # step 1's kernel runs past all of step 2, which launched nothing
    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 90, 5, corr=1), kernel("K", 95, 205, corr=1),
              step(2, 100, 50), op("aten::add", 110, 10), step(3, 150, 250), op("aten::mul", 310, 50)]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    assert [r.wall_ns for r in a.steps] == [300_000, 0, 100_000]
    assert [sum(r.breakdown_ns.values()) for r in a.steps] == [300_000, 0, 100_000]
    assert replay(a, []).before_ns.tolist() == [300_000, 0, 100_000]


@pytest.mark.parametrize("folder", REAL_FOLDERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_step_walls_tile_each_rank(folder: Path) -> None:
    a = real_case(folder)
    if a is None or not (a.graph.steps.step >= 0).any():
        pytest.skip("the reader refuses it, or it has no ProfilerStep")
    g, st = a.graph, a.graph.steps
    raw_dur = g.trace.events.dur_ns[g.event[np.maximum(st.node, 0)]]
    open_step = raw_dur > st.cpu_end_ns - st.cpu_start_ns  # the profiler left it running past the window
    for rank in np.unique(st.rank).tolist():
        mine = st.rank == rank
        if (st.step[mine] < 0).any() or open_step[mine].any() or any(r == rank for _, r in a.partial_steps):
            continue
        _assert_tiles(a, rank)
        if not g.trace.lanes.is_gpu[g.trace.lanes.rank == rank].any():  # CPU-only: the ProfilerStep ranges
            walls = {r.step: r.wall_ns for r in a.steps if r.rank == rank}
            for i in np.flatnonzero(mine):
                assert walls[int(st.step[i])] == pytest.approx(st.cpu_end_ns[i] - st.cpu_start_ns[i], rel=0.01)


def _hand_walls(folder: Path) -> dict[int, float]:
    """ms per step from the raw JSON: a GPU event belongs to the step whose ProfilerStep holds its
    launching call's ts; a step completes with its range or its last GPU event; its window opens at
    its start or where the earlier steps completed, if later."""
    doc = json.loads(gzip.decompress(next(folder.glob("*.json.gz")).read_bytes()))
    ev = doc["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in ev
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    starts = [s for s, _, _ in steps]
    launch = {e["args"]["correlation"]: e["ts"] for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    done = {n: end for _, end, n in steps}
    for e in ev:
        t = launch.get(e.get("args", {}).get("correlation")) if e.get("cat") in _GPU_CATS else None
        i = bisect_right(starts, t) - 1 if t is not None else -1
        if i >= 0 and t < steps[i][1]:
            done[steps[i][2]] = max(done[steps[i][2]], e["ts"] + e["dur"])
    walls, completed = {}, float("-inf")
    for s, _, n in steps:
        walls[n] = (done[n] - max(s, completed)) / 1e3
        completed = max(completed, done[n])
    return walls


@pytest.mark.parametrize(("name", "later", "lo", "hi"), [
    ("ns_resolution", (102, 103, 104, 105), 95.0, 96.0),
    ("negative_queue_length", (551, 552, 553, 554), 212.0, 217.0),
])
def test_run_ahead_steps_count_their_gpu_time_once(name: str, later: tuple[int, ...], lo: float, hi: float) -> None:
    folder = REAL / "hta" / name
    walls = _walls(real_case(folder), 0)
    hand = _hand_walls(folder)
    for s in later:
        assert lo <= walls[s] <= hi
        assert walls[s] == pytest.approx(hand[s], abs=0.02)
    # before, each window also held the previous steps' queued GPU work: 162-185 ms and 377 ms


def test_negative_queue_length_first_step_leaves_out_the_unrecorded_steps_work() -> None:
    a = real_case(REAL / "hta" / "negative_queue_length")
    g, st = a.graph, a.graph.steps
    first = int(np.argmin(st.cpu_start_ns))
    # 867 kernels of step 549, launched before the recording, keep the main stream busy until 163 ms
    assert (st.start_ns[first] - st.cpu_start_ns[first]) / 1e6 == pytest.approx(155.4, abs=0.5)
    walls = _walls(a, 0)
    assert 212.0 <= walls[550] <= 217.0 and not a.slow_steps
    assert sum(walls.values()) == pytest.approx((st.end_ns.max() - st.start_ns[first]) / 1e6, rel=1e-6)
    unlaunched = (g.launch_ns == g.start_ns) & g.trace.lanes.is_gpu[g.lane]
    assert unlaunched.sum() == 872 and (g.step_row[unlaunched] == -1).all()


def test_an_open_step_still_ends_with_the_trace() -> None:
    a = real_case(REAL / "hta" / "triton_example")
    g, st = a.graph, a.graph.steps
    assert st.step.tolist() == [1]
    assert st.start_ns[0] == st.cpu_start_ns[0] and st.end_ns[0] == g.end_ns.max()  # 13.3 s claimed, clamped


def test_steps_from_makes_user_annotations_the_steps() -> None:
    trace = read_trace(REAL / "hta" / "cp_alexnet")
    whole = analyze(trace)
    assert [r.step for r in whole.steps] == [-1] and whole.steps[0].wall_ns > 40e9  # CUDA start-up and all
    a = analyze(trace, steps_from="forward")
    # PARAM wraps each forward in a `forward` range that also clears the cache: the inner one is the step
    assert [r.step for r in a.steps] == [0, 1]
    assert a.steps[1].wall_ns / 1e6 == pytest.approx(36.36, abs=0.05)
    names = [a.graph.node_name(int(n)) for n in a.graph.steps.node]
    assert names == ["[param|pytorch.model.alex_net|0|0|0|warmup|forward]",
                     "[param|pytorch.model.alex_net|0|0|0|measure|forward]"]
    measured = analyze(trace, steps_from=r"measure\|forward")
    assert [(r.step, round(r.wall_ns / 1e6, 2)) for r in measured.steps] == [(0, 36.36)]


def test_steps_from_numbers_each_ranks_annotations_in_order(tmp_path: Path) -> None:
    for r in range(2):
        events = [op("## iteration ##", 10 + 100 * k + r, 80, cat="user_annotation") for k in range(3)]
        events += [op("aten::mm", 20 + 100 * k + r, 30) for k in range(3)]
        write(tmp_path / f"rank{r}.json.gz", [step(7, 0, 400), *events], rank=r, world=2)
    a = analyze(read_trace(tmp_path), steps_from="iteration")
    assert sorted((r.rank, r.step, r.wall_ns) for r in a.steps) == [
        (r, k, 80_000) for r in range(2) for k in range(3)]


@pytest.mark.parametrize(("regex", "message"), [("no such range", "no user annotation matches"),
                                                  ("(", "not a regular expression")])
def test_steps_from_fails_clearly(tmp_path: Path, regex: str, message: str) -> None:
    trace = read_trace(write(tmp_path / "t.json.gz", [op("## step ##", 0, 10, cat="user_annotation")]))
    with pytest.raises(ConfigError, match=message):
        analyze(trace, steps_from=regex)
