from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.graph import EdgeType, build_graph
from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import op, step, write


def _sync_pairs(path: Path) -> set[tuple[str, str]]:
    g = build_graph(read_trace(path))
    src, dst = g.edges_of(EdgeType.SYNC)
    return {(g.node_name(s), g.node_name(d)) for s, d in zip(src.tolist(), dst.tolist())}


def test_threads_hand_work_back_and_forth(tmp_path: Path) -> None:
    # main runs A and waits; thread 2 runs B as soon as A ends and goes idle; main resumes with C
    events = [step(1, 0, 40_000), op("A", 0, 10_000), op("B", 10_050, 10_000, tid=2), op("C", 20_300, 9_000)]
    assert _sync_pairs(write(tmp_path / "t.json.gz", events)) == {("A", "B"), ("B", "C")}


def test_a_busy_thread_hands_off_nothing(tmp_path: Path) -> None:
    # A is followed at once by D on the main thread: A did not stop to wait for anyone
    events = [step(1, 0, 40_000), op("A", 0, 10_000), op("D", 10_000, 15_000), op("B", 10_050, 10_000, tid=2)]
    assert _sync_pairs(write(tmp_path / "t.json.gz", events)) == set()


def test_a_resume_long_after_is_not_a_handoff(tmp_path: Path) -> None:
    events = [step(1, 0, 40_000), op("A", 0, 10_000), op("B", 15_000, 10_000, tid=2)]
    assert _sync_pairs(write(tmp_path / "t.json.gz", events)) == set()


def test_ranges_closed_together_by_the_profiler_stop_hand_off_nothing(tmp_path: Path) -> None:
    # ranges still open when the profiler stopped all end at its stop time (6 ms here): each thread
    # seems to release the other at that instant, which would be a cycle (HTA's MTIA inference trace)
    events = [op("outer_a", 1_000, 5_000, cat="user_annotation"),
              op("outer_b", 1_020, 4_980, tid=2, cat="user_annotation"),
              op("inner_b", 1_050, 4_950, tid=2, cat="user_annotation")]
    path = write(tmp_path / "t.json.gz", events)
    assert _sync_pairs(path) == set()
    (report,) = analyze(read_trace(path)).steps  # no GraphError: the graph has no cycle
    assert report.wall_ns == 5_000_000


def test_three_threads_closed_together_hand_off_in_no_cycle(tmp_path: Path) -> None:
    events = [op(f"outer_{tid}", 1_000 + 10 * tid, 5_000 - 10 * tid, tid=tid, cat="user_annotation")
              for tid in (1, 2, 3)]
    events += [op(f"inner_{tid}", 1_100 + 10 * tid, 4_900 - 10 * tid, tid=tid, cat="user_annotation") for tid in (1, 2, 3)]
    path = write(tmp_path / "t.json.gz", events)
    threads = {(a[-1], b[-1]) for a, b in _sync_pairs(path)}
    releasing, released = {a for a, _ in threads}, {b for _, b in threads}
    assert not releasing & released, f"a thread both releases and is released at the stop: {threads}"
    assert analyze(read_trace(path)).steps  # no GraphError: the graph has no cycle


def test_a_thread_that_ends_as_another_thread_range_closes_still_releases_it(tmp_path: Path) -> None:
    # one way only: thread 2's last op ends exactly when the step on the main thread closes
    events = [step(1, 0, 40_000), op("A", 0, 10_000), op("C", 10_050, 29_950, tid=2)]
    assert ("C", "ProfilerStep#1") in _sync_pairs(write(tmp_path / "t.json.gz", events))
