"""A pipeline job's point graph: the schedule of one replica's step laid over every replica and step.

Each op instance (step, replica, op of the schedule) has a start and an end point; each step an origin.
An op starts after every op it depends on ends (plus its launch delay: the gap the recorder saw
that no dependency explains); a lone op ends its own time after it starts; the members of a
collective group meet at an arrival point, where the last one arrives, and each ends its transfer
time after it. Replays are the project's longest-path pass over those edges with new weights.

Recorded launch delays and transfers can be slightly negative (clocks of two workers skew by up to
milliseconds); the longest-path pass reads a negative weight as "no edge", so weights are offset by a
potential that grows with each point's depth (``_LEVEL_NS`` per level) and taken off again after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.longest_path import EdgeIndex, index_edges, longest_path
from bottleneck_oracle.graph.pipeline.schedule import PipelineSchedule, build_schedule
from bottleneck_oracle.traces.op_table import OpTable

__all__ = ["JobGraph", "build_job_graph", "CLAMP_NS"]

CLAMP_NS = 10_000_000  # a recorded gap below -10 ms is no skew but a mismatch: it counts as 0
_LEVEL_NS = 1 << 32  # far above any negative weight a replay is given
_ZERO, _DELAY, _OWN = 0, 1, 2  # what an edge weighs: nothing, the launch delay or the own time of its op


@dataclass(frozen=True, slots=True)
class JobGraph:
    """The points and edges of every kept step of a pipeline job.

    Shapes: op instances are [I] = [steps × replicas × J], ordered step, replica, schedule op; points [P]:
    the step origins, then each instance's start (``S + 2i``) and end (``S + 2i + 1``), then arrivals.

    Args:
        row (np.ndarray): int64[I] the table row of each instance.
        is_comm (np.ndarray): bool[I] instances that meet a collective group (own time = transfer).
        start_ns, end_ns (np.ndarray): int64[I] recorded times, from the step's start.
    """

    table: OpTable
    schedule: PipelineSchedule
    steps: np.ndarray
    dropped_steps: tuple[int, ...]
    row: np.ndarray
    is_comm: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    arrival: np.ndarray  # int64[I] arrival point of comm instances (-1: none)
    dep_inst: tuple[np.ndarray, np.ndarray]  # instance pairs: (waited for, waiting)
    index: EdgeIndex
    edge_kind: np.ndarray  # int8[E]
    edge_inst: np.ndarray  # int64[E]
    potential: np.ndarray  # int64[P]

    @property
    def replicas(self) -> int:
        return self.table.layout.dp

    @property
    def instances(self) -> int:
        return len(self.row)

    def column(self, values: np.ndarray) -> np.ndarray:
        """A table column read per instance."""
        return values[self.row]

    def recorded_step_ns(self) -> np.ndarray:
        """int64[S] each kept step's recorded wall time: first start to last end of any of its ops."""
        per = self.start_ns.reshape(len(self.steps), -1), self.end_ns.reshape(len(self.steps), -1)
        return per[1].max(1) - per[0].min(1)

    def recorded_delays(self) -> np.ndarray:
        """int64[I] each op's launch delay: its start after the last end of what it waits for (of the step's
        start when it waits for nothing); below ``-CLAMP_NS``, 0."""
        src, dst = self.dep_inst
        ready = np.repeat(self.start_ns.reshape(len(self.steps), -1).min(1), self.instances // len(self.steps))
        waits = np.full(self.instances, np.iinfo(np.int64).min)
        np.maximum.at(waits, dst, self.end_ns[src])
        delay = self.start_ns - np.where(waits > np.iinfo(np.int64).min, waits, ready)
        return np.where(delay <= -CLAMP_NS, 0, delay)

    def recorded_transfers(self) -> np.ndarray:
        """int64[I] each comm op's transfer: its end after the last of its group arrived (below ``-CLAMP_NS``:
        0); the recorded duration for the other ops."""
        comm = np.flatnonzero(self.is_comm)
        last = np.full(len(self.potential), np.iinfo(np.int64).min)
        np.maximum.at(last, self.arrival[comm], self.start_ns[comm])
        own = self.end_ns - self.start_ns
        transfer = self.end_ns[comm] - last[self.arrival[comm]]
        own[comm] = np.where(transfer <= -CLAMP_NS, 0, transfer)
        return own

    def replay(self, own_ns: np.ndarray, delay_ns: np.ndarray | None = None) -> np.ndarray:
        """int64[P] every point's time, from its step's origin, with these own times (duration or transfer)
        and launch delays (default: none) per instance."""
        values = np.stack([np.zeros(self.instances, np.int64), np.zeros(self.instances, np.int64)
                           if delay_ns is None else delay_ns.astype(np.int64), own_ns.astype(np.int64)])
        pot = self.potential
        weight = values[self.edge_kind, self.edge_inst] + pot[self.index.dst] - pot[self.index.src]
        dist, _ = longest_path(self.index, weight)
        return dist - pot

    def step_ns(self, times: np.ndarray) -> np.ndarray:
        """int64[S] each step's wall time on a replayed timeline: its first start to its last end."""
        s = len(self.steps)
        start = times[s + 2 * np.arange(self.instances)].reshape(s, -1)
        end = times[s + 2 * np.arange(self.instances) + 1].reshape(s, -1)
        return end.max(1) - start.min(1)

    def instance_times(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) int64[I] of every instance on a replayed timeline."""
        s = len(self.steps)
        return times[s + 2 * np.arange(self.instances)], times[s + 2 * np.arange(self.instances) + 1]


def _instances(table: OpTable, sched: PipelineSchedule) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(kept steps, row of each instance, dropped steps): a step is kept when each of its workers records
    exactly the schedule's ops."""
    j_count, dp = len(sched), table.layout.dp
    seq_span = int(max(table.seq_id.max(), sched.seq.max())) + 1
    code = lambda st, op, q: (st.astype(np.int64) * 16 + op) * seq_span + q  # noqa: E731
    lookup = dict(zip(code(sched.stage, sched.optype, sched.seq).tolist(), range(j_count)))
    keys = code(table.stage, table.optype, np.maximum(table.seq_id, 0))
    j = _vector_lookup(keys, lookup)
    steps, step_idx = np.unique(table.step, return_inverse=True)
    ok = j >= 0
    slot = (step_idx * dp + table.dp_rank) * j_count + np.where(ok, j, 0)
    count = np.bincount(slot[ok], minlength=len(steps) * dp * j_count).reshape(len(steps), -1)
    extra = np.bincount(step_idx[~ok], minlength=len(steps))
    good = (count == 1).all(1) & (extra == 0)
    row = np.full(len(steps) * dp * j_count, -1, dtype=np.int64)
    row[slot[ok]] = np.flatnonzero(ok)
    row = row.reshape(len(steps), -1)[good].ravel()
    return steps[good], row, [int(s) for s in steps[~good]]


def _vector_lookup(keys: np.ndarray, lookup: dict[int, int]) -> np.ndarray:
    known = np.array(sorted(lookup), dtype=np.int64)
    where = np.clip(np.searchsorted(known, keys), 0, len(known) - 1)
    values = np.array([lookup[k] for k in known.tolist()], dtype=np.int64)
    return np.where(known[where] == keys, values[where], -1)


def build_job_graph(table: OpTable, schedule: PipelineSchedule | None = None) -> JobGraph:
    """The point graph of every step whose workers all record the schedule's ops (the others are dropped).

    Raises:
        TraceFormatError: no step of the table records the schedule on every worker.
    """
    from bottleneck_oracle.errors import TraceFormatError

    sched = schedule or build_schedule(table)
    steps, row, dropped = _instances(table, sched)
    if not len(steps):
        raise TraceFormatError(f"{table.source}: no step records the same ops on every worker")
    s, dp, j_count = len(steps), table.layout.dp, len(sched)
    n = len(row)
    base = (np.arange(s * dp, dtype=np.int64) * j_count)[:, None]  # first instance of each (step, replica)
    start_pt, end_pt = s + 2 * np.arange(n), s + 2 * np.arange(n) + 1
    # arrival points: per (step, replica, group), or per (step, group) for groups over every replica
    g_count = max(len(sched.all_replicas), 1)
    replica = np.repeat(np.tile(np.arange(dp), s), j_count)
    step_of = np.repeat(np.arange(s), dp * j_count)
    group = np.tile(sched.group, s * dp)
    all_rep = np.append(sched.all_replicas, False)[group]
    arrival = np.where(group >= 0, s + 2 * n + (step_of * (dp + 1) + np.where(all_rep, dp, replica)) * g_count
                       + group, -1)
    dep_src = (base + sched.dep_src[None, :]).ravel()
    dep_dst = (base + sched.dep_dst[None, :]).ravel()
    roots = np.setdiff1d(np.arange(j_count), sched.dep_dst)
    root_inst = (base + roots[None, :]).ravel()
    comm = np.flatnonzero(group >= 0)
    lone = np.flatnonzero(group < 0)
    parts = [  # (src point, dst point, weight kind, instance the weight is read from)
        (end_pt[dep_src], start_pt[dep_dst], _DELAY, dep_dst),
        (root_inst // (dp * j_count), start_pt[root_inst], _DELAY, root_inst),
        (start_pt[lone], end_pt[lone], _OWN, lone),
        (start_pt[comm], arrival[comm], _ZERO, comm),
        (arrival[comm], end_pt[comm], _OWN, comm),
    ]
    src = np.concatenate([p[0] for p in parts])
    dst = np.concatenate([p[1] for p in parts])
    kind = np.concatenate([np.full(len(p[0]), p[2], np.int8) for p in parts])
    inst = np.concatenate([p[3] for p in parts])
    points = s + 2 * n + s * (dp + 1) * g_count
    index = index_edges(points, src, dst)
    level, _ = longest_path(index, np.ones(len(src), dtype=np.int64))
    start = table.start_ns[row]
    return JobGraph(table=table, schedule=sched, steps=steps, dropped_steps=tuple(dropped), row=row,
                    is_comm=group >= 0, start_ns=start, end_ns=start + table.duration_ns[row], arrival=arrival,
                    dep_inst=(dep_src, dep_dst), index=index, edge_kind=kind, edge_inst=inst,
                    potential=level * _LEVEL_NS)
