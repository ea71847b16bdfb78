from __future__ import annotations

import numpy as np

from bottleneck_oracle.traces import EventTable, read_trace
from tests.conftest import DATA, REAL


def test_take_and_concat_round_trip() -> None:
    ev = read_trace(REAL / "hta" / "cp_cuda_event_sync").events
    half = len(ev) // 2
    joined = EventTable.concat([ev.take(np.arange(half)), ev.take(np.arange(half, len(ev)))])
    assert len(joined) == len(ev)
    assert np.array_equal(joined.start_ns, ev.start_ns) and np.array_equal(joined.end_ns, ev.end_ns)


def test_rank_info_lookup() -> None:
    trace = read_trace(REAL / "param" / "dlrm_8rank_kineto")
    assert trace.rank_info(5).path.name.startswith("worker5")
    assert trace.rank_info(5).world_size == 8 and trace.rank_info(5).rank_source == "distributedInfo"


def _file_times(trace) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Each event's time as its file wrote it, in ns from its file's base."""
    ev = trace.events
    base = np.array([trace.rank_info(int(r)).base_ns for r in range(len(trace.ranks))])
    return ev.start_ns + trace.origin_ns - base[ev.rank]


def test_moving_a_rank_onto_another_clock_keeps_its_file_times_and_time_zero() -> None:
    """Rank 1 of a real gloo capture moved 5 ms back and rank 0 untouched: nothing before time 0, the
    two ranks 5 ms closer, and every event still maps to the time its file wrote."""
    trace = read_trace(DATA / "gloo_clean")
    for ahead in (5_000_000, -5_000_000, 10_000_000_000):  # the last moves rank 1 before time 0
        moved = trace.with_clocks_moved(np.array([0, ahead], dtype=np.int64))
        assert moved.events.start_ns.min() >= 0 and min(i.window_start_ns for i in moved.ranks) >= 0
        assert np.array_equal(_file_times(moved), _file_times(trace))
        gap = lambda t: np.subtract(*[t.events.start_ns[t.events.rank == r].min() for r in (1, 0)])  # noqa: E731
        assert gap(moved) == gap(trace) - ahead
        assert [i.clock_offset_ns for i in moved.ranks] == [0, ahead]
        first = lambda t, r: t.origin_ns + int(t.events.start_ns[t.events.rank == r].min())  # noqa: E731
        assert first(moved, 0) == first(trace, 0) and first(moved, 1) == first(trace, 1) - ahead
