"""Host waits the trace does not name: a CPU thread that went idle while its rank's GPU still ran work it had
queued, and resumed as that work ended.

A blocking call the profiler recorded (a synchronize, a copy that waits) has its sync edge (``links.py``).
Older profilers record no such call, and a wait inside an op (``.item()`` in a loss scaler, a collective's
host wait) can leave only an idle gap: the thread's annotation open, no op, the GPU busy. The gap is a wait
when the work queued on a stream before the thread went idle was still running then and ended just before
the thread resumed: the queue drained as the thread woke. Its edge goes from that work to the op that
resumed (or the range that closed), so the wait hands over to the GPU on the critical path and follows it in
a replay. A thread idle for its own reasons (Python, I/O) resumes while the queue still holds work, or long
after it drained: no edge.
"""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.graph.grouping import positions_by
from bottleneck_oracle.graph.handoffs import idle_gaps
from bottleneck_oracle.graph.links import GpuNodes

__all__ = ["MIN_WAIT_NS", "RESUME_TOL_NS", "host_wait_edges"]

RESUME_TOL_NS = 50_000  # a thread woken by a drained queue runs on within tens of µs (Python's unwinding)
MIN_WAIT_NS = 200_000  # shorter gaps are Python between ops: a launch-bound thread's gaps end near kernel ends by chance


def host_wait_edges(chain: tuple[np.ndarray, np.ndarray, np.ndarray], kind: np.ndarray, rank: np.ndarray,
                    lane: np.ndarray, start: np.ndarray, end: np.ndarray, cpu: np.ndarray,
                    gpu: GpuNodes) -> tuple[np.ndarray, np.ndarray]:
    """Awaited GPU node → the node that resumed, for every idle gap of a CPU thread that ends as the work its
    rank queued before the gap drained (the latest-ending stream's, when several drained).

    Args:
        chain: the lane chains from ``lane_nesting`` (point 2i = start of node i, 2i+1 its end).
        cpu: bool[N], node lies on a CPU thread.
        gpu: the rank's GPU work in stream order (``GpuNodes``).

    Returns:
        ``(awaited, resumer)`` node pairs.
    """
    c_src, c_dst, _ = chain
    t = np.empty(2 * len(start), dtype=np.int64)
    t[0::2], t[1::2] = start, end
    gaps = idle_gaps(*chain, kind, cpu, t)
    gaps = gaps[t[c_dst[gaps]] - t[c_src[gaps]] >= MIN_WAIT_NS]
    idle_from, resumed_at, resume_point = t[c_src[gaps]], t[c_dst[gaps]], c_dst[gaps]
    gap_rank = rank[resume_point // 2]
    awaited = np.full(len(gaps), -1, dtype=np.int64)
    best_end = np.full(len(gaps), np.iinfo(np.int64).min, dtype=np.int64)
    gpu_lanes = positions_by(rank[gpu.nodes])
    for r, at in positions_by(gap_rank).items():
        for ln in np.unique(lane[gpu.nodes[gpu_lanes.get(r, [])]]).tolist():
            queued = gpu.last_before(ln, idle_from[at])  # the last work on the stream before the thread idled
            q_end = np.where(queued >= 0, end[np.maximum(queued, 0)], np.iinfo(np.int64).min)
            drained = (queued >= 0) & (q_end > idle_from[at]) & (q_end <= resumed_at[at])
            # woken as it drained: within the tolerance, and late in the gap
            slack = resumed_at[at] - q_end
            drained &= (slack <= RESUME_TOL_NS) & (10 * slack <= resumed_at[at] - idle_from[at])
            take = drained & (q_end > best_end[at])
            awaited[at[take]], best_end[at[take]] = queued[take], q_end[take]
    ok = awaited >= 0
    return awaited[ok], (resume_point // 2)[ok]
