from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.dag import EdgeType, build_graph
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
