"""The point graph of a pipeline job: replaying the recorded times gives back the recorded steps to the ns,
an independent event-by-event simulation agrees with the longest-path pass, and incomplete steps drop out."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.graph.pipeline import build_job_graph
from bottleneck_oracle.traces.op_table import read_op_table
from tests.conftest import STRAGGLERS


@pytest.mark.parametrize("job", ["AR", "SE", "ST"])
def test_the_recorded_times_replay_to_the_recorded_steps(job: str) -> None:
    g = build_job_graph(read_op_table(STRAGGLERS / job))
    times = g.replay(g.recorded_transfers(), g.recorded_delays())
    assert np.array_equal(g.step_ns(times), g.recorded_step_ns())
    start, end = g.instance_times(times)
    first = np.repeat(g.start_ns.reshape(len(g.steps), -1).min(1), g.instances // len(g.steps))
    # every op where the recorder saw it, but those whose gap below -10 ms the model reads as 0
    assert np.mean(start + first == g.start_ns) > 0.999 and np.mean(end + first == g.end_ns) > 0.999


def test_negative_gaps_from_skewed_clocks_replay_as_negative_not_as_missing_edges() -> None:
    g = build_job_graph(read_op_table(STRAGGLERS / "SE"))
    delays, transfers = g.recorded_delays(), g.recorded_transfers()
    assert (delays < 0).any()  # SE's clocks skew by microseconds: the weights below zero must still count
    times = g.replay(transfers, delays)
    start, _ = g.instance_times(times)
    src, dst = g.dep_inst
    skewed = dst[delays[dst] < 0][:50]
    for j in skewed:  # an op starts its (negative) delay after the last end of what it waits for
        _, end = g.instance_times(times)
        assert start[j] == end[src[dst == j]].max() + delays[j]


def _simulate(g, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """The paper's simulator, event by event in plain Python: an op starts when what it waits for has ended;
    a collective's members end together, their transfer after the last one starts."""
    n = g.instances
    waits = {j: [] for j in range(n)}
    for u, v in zip(*g.dep_inst):
        waits[int(v)].append(int(u))
    members: dict[int, list[int]] = {}
    for j in np.flatnonzero(g.is_comm):
        members.setdefault(int(g.arrival[j]), []).append(int(j))
    start, end = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    pending = set(range(n))
    while pending:
        moved = False
        for j in sorted(pending):
            if start[j] < 0 and all(end[u] >= 0 for u in waits[j]):
                start[j] = max((end[u] for u in waits[j]), default=0)
                moved = True
            if start[j] >= 0 and end[j] < 0:
                group = members.get(int(g.arrival[j]), [j]) if g.is_comm[j] else [j]
                if all(start[m] >= 0 for m in group):
                    end[j] = (max(start[m] for m in group) if g.is_comm[j] else start[j]) + own[j]
                    pending.discard(j)
                    moved = True
        assert moved, "the simulation deadlocked"
    return start, end


def test_an_independent_event_simulation_agrees_with_the_longest_path_replay() -> None:
    table = read_op_table(STRAGGLERS / "ST")
    g = build_job_graph(table.take(np.isin(table.step, table.steps[:2])))
    own = g.recorded_transfers()
    typical = np.where(g.is_comm, own // 2, own)  # not the recorded times: something the replay never saw
    start, end = g.instance_times(g.replay(typical))
    s2, e2 = _simulate(g, typical)
    assert np.array_equal(start, s2) and np.array_equal(end, e2)


def test_a_step_missing_an_op_on_one_worker_is_dropped_and_named() -> None:
    table = read_op_table(STRAGGLERS / "ST")
    last = table.steps[-1]
    gone = np.flatnonzero((table.step == last) & (table.dp_rank == 1) & (table.stage == 2))[0]
    g = build_job_graph(table.take(np.arange(len(table)) != gone))
    assert g.dropped_steps == (int(last),) and last not in g.steps and len(g.steps) == len(table.steps) - 1
    with pytest.raises(TraceFormatError, match="no step records the same ops on every worker"):
        only_last = table.take((table.step == last) & (np.arange(len(table)) != gone))
        build_job_graph(only_last, build_job_graph(table).schedule)
