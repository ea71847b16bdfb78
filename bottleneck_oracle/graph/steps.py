"""Training steps: ``ProfilerStep#N`` ranges per rank, their windows, and the step every node belongs to.

CPU work belongs to the step whose CPU range holds its start; GPU work to the
step whose CPU launched it (TRACE-NOTES 6.2), except work an unrecorded earlier
step queued before the trace began, which belongs to none. A step completes
with its CPU range or its last GPU work, whichever is later. Its window opens at
its CPU start, or where the rank's earlier work completed if that is later: when
the CPU runs ahead of the GPU, the GPU time spent finishing earlier steps'
queued work is theirs only, and the windows tile the rank's timeline. Without
step annotations the whole trace of a rank is one step, numbered -1, ending with
its last event. ``steps_from`` (a regex) makes the matching user annotations
the steps instead, numbered 0, 1, ... per rank.
"""

from __future__ import annotations

import re

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graph.graph import StepTable
from bottleneck_oracle.graph.grouping import positions_by
from bottleneck_oracle.graph.names import step_number
from bottleneck_oracle.graph.types import NodeKind, Role
from bottleneck_oracle.traces import Trace

__all__ = ["find_steps", "assign_steps", "WHOLE_TRACE"]

WHOLE_TRACE = -1


def _annotation_marks(trace: Trace, kind: np.ndarray, rank: np.ndarray, name: np.ndarray, start: np.ndarray,
                      end: np.ndarray, steps_from: str) -> np.ndarray:
    """User annotations whose name matches ``steps_from``, innermost where matches nest.

    Nested matches are one region wrapped by set-up of the same name (PARAM's ``forward``
    holds a cache clear then the real ``forward``): the innermost is the step.
    """
    try:
        pattern = re.compile(steps_from)
    except re.error as e:
        raise ConfigError(f"steps_from: {steps_from!r} is not a regular expression: {e}") from None
    hit = np.array([bool(pattern.search(s)) for s in trace.strings], dtype=bool)
    marks = np.flatnonzero((kind == NodeKind.ANNOTATION) & hit[name])
    if not len(marks):
        raise ConfigError(f"steps_from: no user annotation matches {steps_from!r}")
    marks = marks[np.lexsort((-end[marks], start[marks], rank[marks]))]
    nxt = np.append(marks[1:], -1)
    holds_next = (nxt >= 0) & (rank[np.maximum(nxt, 0)] == rank[marks]) & (start[np.maximum(nxt, 0)] < end[marks])
    return marks[~holds_next]


def _numbers(trace: Trace, marks: np.ndarray, rank: np.ndarray, name: np.ndarray,
             by_order: bool) -> np.ndarray:
    """Step number of each mark (marks in rank, start order): N of ``ProfilerStep#N``, or its place."""
    if by_order:
        first = np.searchsorted(rank[marks], rank[marks], side="left")
        return np.arange(len(marks)) - first
    return np.array([n if (n := step_number(trace.strings[name[m]])) is not None else -1 for m in marks.tolist()],
                    dtype=np.int64)


def find_steps(trace: Trace, kind: np.ndarray, role: np.ndarray, rank: np.ndarray, name: np.ndarray,
               start: np.ndarray, end: np.ndarray, steps_from: str | None = None) -> StepTable:
    """One row per (rank, step), clamped to the rank's recording window.

    ``start_ns`` and ``end_ns`` are provisional (the CPU range) until ``assign_steps``
    adds GPU work and tiles the windows.
    """
    if steps_from is None:
        marks = np.flatnonzero(role == Role.STEP)
        marks = marks[np.lexsort((start[marks], rank[marks]))]
    else:
        marks = _annotation_marks(trace, kind, rank, name, start, end, steps_from)
    number = _numbers(trace, marks, rank, name, by_order=steps_from is not None)
    rows: list[tuple[int, int, int, int, int]] = []
    for info in trace.ranks:
        r = info.rank
        mine = rank[marks] == r
        seen: set[int] = set()
        for node, n in zip(marks[mine].tolist(), number[mine].tolist()):
            if n < 0 or n in seen:
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
        cpu_start_ns=arr[:, 3], start_ns=arr[:, 3].copy(), cpu_end_ns=arr[:, 4], end_ns=arr[:, 4].copy(),
        last_node=np.full(len(arr), -1, dtype=np.int64), opened_by=np.full(len(arr), -1, dtype=np.int64),
    )


def _last_nodes(steps: StepTable, row: np.ndarray, end: np.ndarray, is_gpu: np.ndarray) -> np.ndarray:
    """int64[steps]: per step, the node whose end completes it: its annotation or its last GPU work
    (any node of a whole-trace step); -1 for a step that holds none."""
    mark = np.zeros(len(row), dtype=bool)
    mark[steps.node[steps.node >= 0]] = True
    whole = steps.step[np.maximum(row, 0)] == WHOLE_TRACE
    inside = np.flatnonzero((row >= 0) & (mark | is_gpu | whole))
    order = inside[np.lexsort((end[inside], row[inside]))]
    rows = row[order]
    last = np.flatnonzero(np.append(rows[1:] != rows[:-1], True)) if len(rows) else rows  # no node in any step
    out = np.full(len(steps), -1, dtype=np.int64)
    out[rows[last]] = order[last]
    return out


def _tile(steps: StepTable, end_ns: np.ndarray, last_node: np.ndarray, queued: np.ndarray,
          end: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Window starts: the CPU start, or where the rank's earlier work completed if later.

    Earlier work is the rank's earlier steps and, for its first step, the GPU work
    ``queued`` before the trace. Returns ``(start_ns, opened_by)``: ``opened_by`` is the
    node whose end opens the window (-1: its CPU start; its own last node when earlier
    work completed after it did, which leaves it an empty window).
    """
    start = steps.cpu_start_ns.copy()
    opened_by = np.full(len(steps), -1, dtype=np.int64)
    order = np.lexsort((steps.cpu_start_ns, steps.rank))
    queued_nodes = np.flatnonzero(queued)
    queued_of = positions_by(rank[queued_nodes])
    for r, at in positions_by(steps.rank[order]).items():
        mine = order[at]
        if steps.step[mine[0]] == WHOLE_TRACE:
            continue
        before = queued_nodes[queued_of.get(r, [])]
        first = before[np.argmax(end[before])] if len(before) else -1
        e = np.concatenate([[end[first] if first >= 0 else np.iinfo(np.int64).min], end_ns[mine]])
        node = np.concatenate([[first], last_node[mine]])
        done = np.maximum.accumulate(e)
        at = np.maximum.accumulate(np.where(e == done, np.arange(len(e)), 0))  # what completed last
        prev_done, cpu_start = done[:-1], steps.cpu_start_ns[mine]
        later = prev_done > cpu_start
        start[mine] = np.where(later, np.minimum(prev_done, end_ns[mine]), cpu_start)
        opened_by[mine] = np.where(prev_done >= end_ns[mine], last_node[mine], np.where(later, node[at[:-1]], -1))
    return start, opened_by


def assign_steps(steps: StepTable, rank: np.ndarray, start: np.ndarray, end: np.ndarray, is_gpu: np.ndarray,
                 launched_by: np.ndarray, queued: np.ndarray) -> tuple[np.ndarray, StepTable]:
    """Step number of every node, and the step table with completions and tiled windows.

    Args:
        launched_by: int64[N], the runtime call that launched each GPU node (-1).
        queued: bool[N], GPU work queued before the trace (``links.queued_before_trace``).

    Returns:
        ``(step_row int32[N], steps)``: the row of ``steps`` each node belongs
        to (-1 for nodes outside every step, GPU work queued before the trace included).
    """
    row = np.full(len(rank), -1, dtype=np.int64)
    order = np.lexsort((steps.cpu_start_ns, steps.rank))
    nodes_of = positions_by(rank)
    for r, at in positions_by(steps.rank[order]).items():
        mine = order[at]
        nodes = nodes_of.get(r, np.zeros(0, dtype=np.int64))
        pos = np.searchsorted(steps.cpu_start_ns[mine], start[nodes], side="right") - 1
        hit = (pos >= 0) & (start[nodes] < steps.cpu_end_ns[mine][np.maximum(pos, 0)])
        hit |= (pos >= 0) & (steps.step[mine][np.maximum(pos, 0)] == WHOLE_TRACE)
        row[nodes[hit]] = mine[pos[hit]]
    gpu = np.flatnonzero(is_gpu & (launched_by >= 0))
    row[gpu] = row[launched_by[gpu]]
    # work an earlier, unrecorded step queued is that step's, not the first recorded one's
    whole = np.zeros(int(rank.max()) + 1 if len(rank) else 0, dtype=bool)
    whole[steps.rank[steps.step == WHOLE_TRACE]] = True
    queued = queued & ~whole[rank]
    row[queued] = -1
    # a step ends with its CPU range or its last GPU work; helper threads (a gloo
    # worker tidying up after the main thread moved on) do not lengthen it
    end_ns = steps.cpu_end_ns.copy()
    extends = (row >= 0) & is_gpu
    np.maximum.at(end_ns, row[extends], end[extends])
    last_node = _last_nodes(steps, row, end, is_gpu)
    start_ns, opened_by = _tile(steps, end_ns, last_node, queued, end, rank)
    table = StepTable(steps.rank, steps.step, steps.node, steps.cpu_start_ns, start_ns, steps.cpu_end_ns, end_ns,
                      last_node, opened_by)
    return row.astype(np.int32), table
