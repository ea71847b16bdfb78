"""Training steps: ``ProfilerStep#N`` ranges per rank, and the step every node belongs to.

CPU work belongs to the step whose range holds its start; GPU work to the step
whose CPU launched it (TRACE-NOTES 6.2). A step ends with its range or its last
GPU work, whichever is later. Without step annotations the whole trace of a
rank is one step, numbered -1, ending with its last event.
"""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.dag.graph import StepTable
from bottleneck_oracle.dag.names import step_number
from bottleneck_oracle.dag.types import Role
from bottleneck_oracle.traces import Trace

__all__ = ["find_steps", "assign_steps"]

WHOLE_TRACE = -1


def find_steps(trace: Trace, role: np.ndarray, rank: np.ndarray, name: np.ndarray,
               start: np.ndarray, end: np.ndarray) -> StepTable:
    """One row per (rank, ProfilerStep#N), clamped to the rank's recording window.

    ``end_ns`` is provisional (the CPU end) until ``assign_steps`` adds GPU work.
    """
    rows: list[tuple[int, int, int, int, int]] = []
    marks = np.flatnonzero(role == Role.STEP)
    for info in trace.ranks:
        r = info.rank
        mine = marks[rank[marks] == r]
        seen: set[int] = set()
        for node in mine[np.argsort(start[mine], kind="stable")].tolist():
            n = step_number(trace.strings[name[node]])
            if n is None or n in seen:
                continue
            seen.add(n)
            s = max(int(start[node]), info.window_start_ns)
            e = min(int(end[node]), info.window_end_ns)
            rows.append((r, n, node, s, max(e, s)))
        if not seen:
            on_rank = rank == r
            if on_rank.any():
                rows.append((r, WHOLE_TRACE, -1, int(start[on_rank].min()), int(end[on_rank].max())))
    arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return StepTable(
        rank=arr[:, 0].astype(np.int32), step=arr[:, 1].astype(np.int32), node=arr[:, 2].astype(np.int32),
        start_ns=arr[:, 3], cpu_end_ns=arr[:, 4], end_ns=arr[:, 4].copy(),
    )


def assign_steps(steps: StepTable, rank: np.ndarray, start: np.ndarray, end: np.ndarray,
                 is_gpu: np.ndarray, launched_by: np.ndarray) -> tuple[np.ndarray, StepTable]:
    """Step number of every node, and the step table with ends that include GPU work.

    Args:
        launched_by: int64[N], the runtime call that launched each GPU node (-1).

    Returns:
        ``(step_row int32[N], steps)``: the row of ``steps`` each node belongs
        to (-1 for nodes outside every step).
    """
    row = np.full(len(rank), -1, dtype=np.int64)
    order = np.lexsort((steps.start_ns, steps.rank))
    for r in np.unique(steps.rank).tolist():
        mine = order[steps.rank[order] == r]
        nodes = np.flatnonzero(rank == r)
        pos = np.searchsorted(steps.start_ns[mine], start[nodes], side="right") - 1
        hit = (pos >= 0) & (start[nodes] < steps.cpu_end_ns[mine][np.maximum(pos, 0)])
        hit |= (pos >= 0) & (steps.step[mine][np.maximum(pos, 0)] == WHOLE_TRACE)
        row[nodes[hit]] = mine[pos[hit]]
    gpu = np.flatnonzero(is_gpu & (launched_by >= 0))
    row[gpu] = row[launched_by[gpu]]
    # a step ends with its ProfilerStep range or its last GPU work; helper threads (a gloo
    # worker tidying up after the main thread moved on) do not lengthen it
    end_ns = steps.cpu_end_ns.copy()
    extends = (row >= 0) & is_gpu
    np.maximum.at(end_ns, row[extends], end[extends])
    table = StepTable(steps.rank, steps.step, steps.node, steps.start_ns, steps.cpu_end_ns, end_ns)
    return row.astype(np.int32), table
