"""Hand-offs between the CPU threads of one rank, inferred from their idle gaps.

A thread that stops and waits (``loss.backward()`` on the main thread while
the autograd thread runs backward; a main thread waiting for a pin-memory or
gloo thread) shows only an uncovered gap. When a thread resumes right after
another thread of the same rank finished its last op and went idle, the
second released the first: the edge goes from that op to the resuming op.
Requiring the releaser to go idle keeps busy threads from being blamed.
"""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.graph.types import NodeKind

__all__ = ["handoff_edges", "idle_gaps", "idle_resumes", "MIN_GAP_NS"]

MIN_GAP_NS = 10_000
HANDOFF_TOL_NS = 1_000_000  # Python unwinding after a wait takes a few hundred µs


def idle_gaps(chain_src: np.ndarray, chain_dst: np.ndarray, chain_owner: np.ndarray, kind: np.ndarray,
          cpu: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Chain edges that are idle time on a CPU thread (no op open, only annotations or Python frames)."""
    o = np.maximum(chain_owner, 0)
    idle = (chain_owner < 0) | (kind[o] == NodeKind.ANNOTATION) | (kind[o] == NodeKind.PYTHON)
    return np.flatnonzero(idle & cpu[chain_src // 2] & (t[chain_dst] - t[chain_src] >= MIN_GAP_NS))


def handoff_edges(chain_src: np.ndarray, chain_dst: np.ndarray, chain_owner: np.ndarray,
                  kind: np.ndarray, rank: np.ndarray, lane: np.ndarray, start: np.ndarray,
                  end: np.ndarray, cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Releasing op → resuming op, for every idle gap that ends when another thread goes idle.

    The resuming op is the one that starts, or the range that ends, where the gap ends.

    Args:
        chain_*: the lane chains from ``lane_nesting`` (point 2i = start of node i, 2i+1 its end).
        cpu: bool[N], node lies on a CPU thread.

    Returns:
        ``(releaser, resumer)`` node pairs.
    """
    t = np.empty(2 * len(start), dtype=np.int64)
    t[0::2], t[1::2] = start, end
    gaps = idle_gaps(chain_src, chain_dst, chain_owner, kind, cpu, t)
    first, last = _lane_ends(chain_src, chain_dst, len(start), cpu)
    # releasers: ops after which their thread runs no op for a while (ranges may open in between,
    # as `## backward ##` does before the thread waits), or that end the thread
    rel_point = np.concatenate([chain_src[gaps][chain_src[gaps] % 2 == 1], last])
    releaser = np.union1d(rel_point // 2, _ops_before_idle(kind, lane, start, end, cpu))
    order = np.lexsort((end[releaser], rank[releaser]))
    releaser = releaser[order]
    key_r = rank[releaser].astype(np.int64)
    # resumers: where a gap ends (an op starts, or an enclosing range ends), and every thread's first op
    resume_point = np.concatenate([chain_dst[gaps], first])
    resumer = resume_point // 2
    when = t[resume_point]
    gap_start = np.concatenate([t[chain_src[gaps]], np.full(len(first), np.iinfo(np.int64).min)])
    src, dst, at = [], [], []
    taken = np.zeros(len(resumer), dtype=bool)
    positions = _searchsorted_pairs(key_r, end[releaser], rank[resumer].astype(np.int64), when)
    for back in (1, 2):  # the latest releaser, or the one before it when that one is on our own thread
        pos = positions - back
        cand = releaser[np.maximum(pos, 0)]
        ok = (pos >= 0) & ~taken & (key_r[np.maximum(pos, 0)] == rank[resumer]) & (lane[cand] != lane[resumer])
        ok &= (end[cand] <= when) & (when - end[cand] <= HANDOFF_TOL_NS) & (end[cand] > gap_start)
        ok &= ~((resume_point % 2 == 1) & (start[resumer] >= end[cand]))
        src.append(cand[ok])
        dst.append(resumer[ok])
        at.append(when[ok])
        taken |= ok
    src_, dst_, at_ = (np.concatenate(x).astype(np.int64) for x in (src, dst, at))
    keep = ~_mutual_ties(lane[src_], lane[dst_], end[src_], at_)
    return src_[keep], dst_[keep]


def _mutual_ties(src_lane: np.ndarray, dst_lane: np.ndarray, released: np.ndarray, resumed: np.ndarray) -> np.ndarray:
    """bool per hand-off: it ties (its releaser ended as the resumer resumed) between two threads that,
    at that instant, each release and resume in ties. Which released which cannot be told then (ranges
    still open when the profiler stopped are all closed at its stop time) and such ties may form a
    cycle; every cycle of ties runs through such threads only, so dropping these breaks them all."""
    tie = np.flatnonzero(released == resumed)
    out = np.zeros(len(released), dtype=bool)
    if not len(tie):
        return out
    at = resumed[tie].tolist()
    srcs, dsts = set(zip(src_lane[tie].tolist(), at)), set(zip(dst_lane[tie].tolist(), at))
    both = srcs & dsts
    out[tie] = [(s, t) in both and (d, t) in both for s, d, t in zip(src_lane[tie].tolist(), dst_lane[tie].tolist(), at)]
    return out


def idle_resumes(chain_src: np.ndarray, chain_dst: np.ndarray, chain_owner: np.ndarray, kind: np.ndarray,
                 start: np.ndarray, end: np.ndarray, cpu: np.ndarray,
                 min_gap_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Every op that starts a CPU thread again after at least ``min_gap_ns`` idle, and when its thread
    went idle."""
    t = np.empty(2 * len(start), dtype=np.int64)
    t[0::2], t[1::2] = start, end
    gaps = idle_gaps(chain_src, chain_dst, chain_owner, kind, cpu, t)
    gaps = gaps[(chain_dst[gaps] % 2 == 0) & (t[chain_dst[gaps]] - t[chain_src[gaps]] >= min_gap_ns)]
    return chain_dst[gaps] // 2, t[chain_src[gaps]]


def _ops_before_idle(kind: np.ndarray, lane: np.ndarray, start: np.ndarray, end: np.ndarray,
                     cpu: np.ndarray) -> np.ndarray:
    """CPU ops whose thread starts no other op (ranges aside) for MIN_GAP_NS after they end."""
    work = np.flatnonzero(cpu & ~np.isin(kind, (NodeKind.ANNOTATION, NodeKind.PYTHON)))
    idle = np.full(len(work), MIN_GAP_NS, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(lane[work])) + 1  # nodes are in (lane, start) order
    for lo, hi in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(work)]])):
        mine = work[lo:hi]
        nxt = np.searchsorted(start[mine], end[mine], side="left")
        has = nxt < len(mine)
        idle[lo:hi][has] = start[mine[nxt[has]]] - end[mine[has]]
    return work[idle >= MIN_GAP_NS]


def _lane_ends(chain_src: np.ndarray, chain_dst: np.ndarray, n: int, cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last point of every CPU lane chain (points with no chain edge in, or out)."""
    has_in = np.zeros(2 * n, dtype=bool)
    has_out = np.zeros(2 * n, dtype=bool)
    has_in[chain_dst] = True
    has_out[chain_src] = True
    on_cpu = np.repeat(cpu, 2)
    first = np.flatnonzero(~has_in & on_cpu & (np.arange(2 * n) % 2 == 0))
    last = np.flatnonzero(~has_out & on_cpu & (np.arange(2 * n) % 2 == 1))
    return first, last


def _searchsorted_pairs(key_a: np.ndarray, val_a: np.ndarray, key_q: np.ndarray, val_q: np.ndarray) -> np.ndarray:
    """Insertion points (right side) of (key_q, val_q) in the lexicographically sorted (key_a, val_a)."""
    lo = np.searchsorted(key_a, key_q, side="left")
    hi = np.searchsorted(key_a, key_q, side="right")
    out = np.empty(len(key_q), dtype=np.int64)
    for k in np.unique(key_q).tolist():
        q = key_q == k
        a, b = int(lo[q][0]), int(hi[q][0])
        out[q] = a + np.searchsorted(val_a[a:b], val_q[q], side="right")
    return out
