"""What each rank's GPU did, for the whole trace and in every step: busy, idle, and with what.

The definition is TraceLens's ``gpu_timeline`` (TRACE-NOTES 9), so the two tools agree on one file:
the kernels, copies and fills of the GPU rows; communication is the kernels of ``COMM_LIBRARIES``;
computation the union of the other kernels and the fills; exposed communication the communication no
computation overlaps; exposed memcpy the copies neither overlaps; busy the union of all; idle the
window's rest. Over the whole trace, as in TraceLens, only the GPU ops a runtime call of the rank
launched count (its ``include_unlinked_kernels=False``; every op where none is linked, as on a GPU-only
trace), and the window runs from the first to the last of them. A GPU-side ``ProfilerStep`` label is
no window: on ROCm DDP traces it is a 17 µs marker. A step's window is its tiled window
(``graph/steps.py``), over all its GPU ops.

The critical-path breakdown answers another question (what delayed the step); this one is what the
GPU did, and a finding may not contradict it: a faster host cannot save time the GPU was busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.grouping import positions_by
from bottleneck_oracle.graph.intervals import covered, merged
from bottleneck_oracle.graph.links import lookup, rank_key
from bottleneck_oracle.graph.names import classify_names
from bottleneck_oracle.traces import EventKind, Trace

__all__ = ["FIELDS", "GpuTimeline", "gpu_ranks", "step_gpu_timeline", "trace_gpu_timeline"]

FIELDS = ("computation", "comm", "exposed_comm", "memcpy", "exposed_memcpy", "busy", "idle", "total")


@dataclass(frozen=True, slots=True)
class GpuTimeline:
    """One row per window: ``rank`` and the time of each of ``FIELDS`` in it, int64 ns.

    Shapes:
        every field is a 1-D array of length W.
    """

    rank: np.ndarray
    computation_ns: np.ndarray
    comm_ns: np.ndarray
    exposed_comm_ns: np.ndarray
    memcpy_ns: np.ndarray
    exposed_memcpy_ns: np.ndarray
    busy_ns: np.ndarray
    idle_ns: np.ndarray
    total_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.rank)

    def record(self, i: int) -> dict[str, float]:
        """Window ``i`` in ms (rounded to ns), keyed ``computation_ms``, ..., ``total_ms``."""
        return {f"{f}_ms": round(int(getattr(self, f"{f}_ns")[i]) / 1e6, 6) for f in FIELDS}

    def busy_share(self, i: int) -> float:
        """How much of window ``i`` the GPU was busy (0 for an empty window)."""
        total = int(self.total_ns[i])
        return int(self.busy_ns[i]) / total if total > 0 else 0.0

    def work_ns(self, i: int) -> int:
        """Window ``i``'s GPU time but its exposed communication: a collective's kernel waits for its
        peers as long as the last is late, so its exposed time is no work of this GPU's (a faster host
        elsewhere saves it); computation and copies are, and only kernel-side changes shorten them."""
        return int(self.computation_ns[i]) + int(self.exposed_memcpy_ns[i])

    def work_share(self, i: int) -> float:
        """How much of window ``i`` the GPU worked (``work_ns``; 0 for an empty window)."""
        total = int(self.total_ns[i])
        return self.work_ns(i) / total if total > 0 else 0.0


class _RankGpu:
    """The interval unions of one rank's GPU work, by what it is."""

    def __init__(self, start: np.ndarray, end: np.ndarray, comm: np.ndarray, copy: np.ndarray) -> None:
        compute = ~comm & ~copy
        self.compute = merged(start[compute], end[compute])
        self.comm = merged(start[comm], end[comm])
        self.compute_or_comm = merged(start[~copy], end[~copy])
        self.copy = merged(start[copy], end[copy])
        self.any = merged(start, end)

    def measure(self, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
        def cover(intervals: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
            return covered(*intervals, lo, hi).astype(np.int64)

        compute, comm, either, busy = cover(self.compute), cover(self.comm), cover(self.compute_or_comm), cover(self.any)
        total = np.maximum(hi - lo, 0)
        return {"computation": compute, "comm": comm, "exposed_comm": either - compute, "memcpy": cover(self.copy),
                "exposed_memcpy": busy - either, "busy": busy, "idle": total - busy, "total": total}


def _gpu_rows(trace: Trace) -> np.ndarray:
    """Event rows of every kernel, copy and fill of the trace."""
    return np.flatnonzero(np.isin(trace.events.kind, (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)))


def _gpu_columns(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(start, end, is_comm, is_copy)`` of the GPU events ``rows``."""
    ev = trace.events
    _, comm_name, _ = classify_names(trace.strings)
    kind = ev.kind[rows]
    is_comm = (kind == EventKind.KERNEL) & comm_name[ev.name[rows]]
    return ev.start_ns[rows], ev.start_ns[rows] + ev.dur_ns[rows], is_comm, kind == EventKind.MEMCPY


def _by_rank(trace: Trace) -> dict[int, _RankGpu]:
    rows = _gpu_rows(trace)
    start, end, comm, copy = _gpu_columns(trace, rows)
    return {r: _RankGpu(start[m], end[m], comm[m], copy[m]) for r, m in positions_by(trace.events.rank[rows]).items()}


def _table(rows: list[tuple[int, dict[str, np.ndarray]]]) -> GpuTimeline:
    ranks = np.concatenate([np.full(len(m["total"]), r, dtype=np.int32) for r, m in rows]) if rows else np.zeros(0, np.int32)
    cols = {f"{f}_ns": (np.concatenate([m[f] for _, m in rows]) if rows else np.zeros(0, np.int64)) for f in FIELDS}
    return GpuTimeline(rank=ranks, **cols)


def gpu_ranks(trace: Trace) -> set[int]:
    """The ranks that recorded GPU work (a kernel, copy or fill)."""
    return set(trace.events.rank[_gpu_rows(trace)].tolist())


def _launched(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """bool per GPU event of ``rows``: a runtime call of its rank carries its correlation id."""
    ev = trace.events
    calls = np.flatnonzero((ev.kind == EventKind.RUNTIME) & (ev.correlation >= 0))
    return lookup(rank_key(ev.rank[calls], ev.correlation[calls]), calls, rank_key(ev.rank[rows], ev.correlation[rows])) >= 0


def trace_gpu_timeline(trace: Trace) -> GpuTimeline:
    """One row per rank with GPU work, over the trace's window (ranks in order)."""
    rows = _gpu_rows(trace)
    launched = _launched(trace, rows)
    columns = _gpu_columns(trace, rows)
    out = []
    for r, mine in sorted(positions_by(trace.events.rank[rows]).items()):
        if launched[mine].any():
            mine = mine[launched[mine]]
        gpu = _RankGpu(*(col[mine] for col in columns))
        out.append((r, gpu.measure(np.array([gpu.any[0][0]]), np.array([gpu.any[1][-1]]))))
    return _table(out)


def step_gpu_timeline(g: ExecGraph) -> GpuTimeline:
    """One row per row of ``g.steps``, over the step's window; all zeros but the window (idle, total)
    on a rank without GPU work."""
    steps = g.steps
    by_rank = _by_rank(g.trace)
    out = {f: np.zeros(len(steps), dtype=np.int64) for f in FIELDS}
    for rank, rows in positions_by(steps.rank).items():
        lo, hi = steps.start_ns[rows], steps.end_ns[rows]
        measured = by_rank[rank].measure(lo, hi) if rank in by_rank else None
        for f in FIELDS:
            if measured is not None:
                out[f][rows] = measured[f]
        if measured is None:
            out["total"][rows] = out["idle"][rows] = np.maximum(hi - lo, 0)
    return GpuTimeline(rank=steps.rank.copy(), **{f"{f}_ns": v for f, v in out.items()})
