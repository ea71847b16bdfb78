"""CPU↔GPU links: launches (correlation ids) and synchronisations (cuda_sync events or call names)."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.graph.grouping import positions_by
from bottleneck_oracle.graph.types import NodeKind, Role
from bottleneck_oracle.traces import EventKind, SyncKind, Trace

__all__ = ["BACKLOG_GAP_NS", "GpuNodes", "inferred_stream_waits", "launch_edges", "lookup", "queued_before_trace",
           "rank_key", "sync_edges"]

_GPU_NODE_KINDS = (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.COMM)
_COPY_TOL_NS = 1_000
BACKLOG_GAP_NS = 1_000_000  # a stream idle this long has run dry: what it runs after was launched later


def rank_key(rank: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """One int64 key per (rank, id): ids such as correlation ids repeat across ranks."""
    return rank.astype(np.int64) << 33 | (ids.astype(np.int64) & 0x1FFFFFFFF)


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[keys == query] for each query (first match), -1 when absent."""
    if not len(keys) or not len(query):
        return np.full(len(query), -1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    pos = np.minimum(np.searchsorted(sk, query), len(sk) - 1)
    return np.where(sk[pos] == query, values[order][pos], -1)


def launch_edges(
    kind: np.ndarray, rank: np.ndarray, correlation: np.ndarray, is_gpu_lane: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Runtime call → every GPU node with its correlation id (a graph launch has many).

    Returns:
        ``(call, gpu_node)`` node pairs.
    """
    calls = np.flatnonzero((kind == NodeKind.RUNTIME) & (correlation >= 0))
    gpu = np.flatnonzero(np.isin(kind, _GPU_NODE_KINDS) & is_gpu_lane & (correlation >= 0))
    found = lookup(rank_key(rank[calls], correlation[calls]), calls, rank_key(rank[gpu], correlation[gpu]))
    ok = found >= 0
    return found[ok], gpu[ok]


def queued_before_trace(lane: np.ndarray, start: np.ndarray, end: np.ndarray, is_gpu: np.ndarray,
                        launched_by: np.ndarray) -> np.ndarray:
    """bool[N]: GPU work queued before the trace (TRACE-NOTES 3.3): the unlaunched work of a stream ahead of
    its first launched work. A stream with no launched work (a comm stream fed by an unprofiled thread) has
    no backlog. A stream that runs unlaunched work after its first launched work lost launch records (a
    filtered trace): its prefix is a backlog only up to its first idle stretch of ``BACKLOG_GAP_NS``, after
    which its work was launched later. (A clean prefix may idle inside: the queue waits on other streams.)"""
    launched = is_gpu & (launched_by >= 0)
    orphan = is_gpu & (launched_by < 0)
    n_lanes = int(lane.max()) + 1 if len(lane) else 0
    first = np.full(n_lanes, np.iinfo(np.int64).min, dtype=np.int64)
    first[np.unique(lane[launched])] = np.iinfo(np.int64).max
    np.minimum.at(first, lane[launched], start[launched])
    queued = orphan & (start < first[lane])
    dropped = np.unique(lane[orphan & (start > first[lane])])  # streams that lost launch records
    ahead = np.flatnonzero(queued & np.isin(lane, dropped))
    for at in positions_by(lane[ahead]).values():
        nodes = ahead[at]
        nodes = nodes[np.argsort(start[nodes], kind="stable")]
        ran_until = np.maximum.accumulate(end[nodes])  # ranges on the stream (annotations) nest
        dry = np.flatnonzero(start[nodes[1:]] - ran_until[:-1] > BACKLOG_GAP_NS)
        if len(dry):
            queued[nodes[dry[0] + 1:]] = False
    return queued


class GpuNodes:
    """GPU nodes per lane in stream order, for "last work launched before t" lookups.

    Args:
        launch_ns: int64[N], when each node was launched; work queued before the trace
            (``queued_before_trace``) at the int64 minimum: it was queued before anything the trace shows.
    """

    def __init__(self, lane: np.ndarray, launch_ns: np.ndarray, gpu_nodes: np.ndarray) -> None:
        order = gpu_nodes[np.lexsort((launch_ns[gpu_nodes], lane[gpu_nodes]))]
        self.nodes = order
        self.lane = lane[order]
        # stream order is FIFO: launch times per lane are made monotone for searching
        self.launch = launch_ns[order].copy()
        bounds = np.flatnonzero(np.diff(self.lane)) + 1
        for seg in np.split(np.arange(len(order)), bounds):
            self.launch[seg] = np.maximum.accumulate(self.launch[seg]) if len(seg) else self.launch[seg]
        self.lane_ids, self.lane_start = np.unique(self.lane, return_index=True)

    def _span(self, lane: int) -> tuple[int, int]:
        i = np.searchsorted(self.lane_ids, lane)
        if i >= len(self.lane_ids) or self.lane_ids[i] != lane:
            return 0, 0
        hi = self.lane_start[i + 1] if i + 1 < len(self.lane_start) else len(self.nodes)
        return int(self.lane_start[i]), int(hi)

    def last_before(self, lane: int, t: np.ndarray) -> np.ndarray:
        """For each time, the last node on ``lane`` launched before it (-1 if none)."""
        lo, hi = self._span(lane)
        pos = np.searchsorted(self.launch[lo:hi], t, side="left") - 1
        return np.where(pos >= 0, self.nodes[lo:hi][np.maximum(pos, 0)], -1) if hi > lo else np.full(len(t), -1)

    def first_after(self, lane: int, t: np.ndarray) -> np.ndarray:
        """For each time, the first node on ``lane`` launched after it (-1 if none)."""
        lo, hi = self._span(lane)
        pos = np.searchsorted(self.launch[lo:hi], t, side="right")
        ok = pos < hi - lo
        return np.where(ok, self.nodes[lo:hi][np.minimum(pos, max(hi - lo - 1, 0))], -1) if hi > lo else np.full(len(t), -1)


def _sync_info(trace: Trace, rank: np.ndarray, correlation: np.ndarray, calls: np.ndarray) -> dict[str, np.ndarray]:
    """cuda_sync event fields for each call (kind NONE when the trace has no sync event for it)."""
    ev = trace.events
    sync = np.flatnonzero(ev.kind == EventKind.SYNC)
    row = lookup(rank_key(ev.rank[sync], ev.correlation[sync]), sync, rank_key(rank[calls], correlation[calls]))
    has = row >= 0
    r = np.maximum(row, 0)
    return {
        "kind": np.where(has, ev.sync_kind[r], SyncKind.NONE),
        "stream": np.where(has, ev.stream[r], -1),
        "wait_stream": np.where(has, ev.wait_stream[r], -1),
        "wait_record": np.where(has, ev.wait_record[r], -1),
        "device": np.where(has, trace.lanes.device[ev.lane[r]], -1),
    }


def _gpu_lane_index(trace: Trace) -> dict[tuple[int, int, int], int]:
    lanes = trace.lanes
    return {
        (int(lanes.rank[i]), int(lanes.device[i]), int(lanes.stream[i])): i
        for i in np.flatnonzero(lanes.is_gpu)
    }


def sync_edges(
    trace: Trace, kind: np.ndarray, role: np.ndarray, rank: np.ndarray, start: np.ndarray,
    end: np.ndarray, correlation: np.ndarray, gpu: GpuNodes, launched_by: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Awaited GPU node → the call that waited (CPU) or the work that waited (GPU).

    Blocking calls (device/stream/event synchronize, and copies whose copy ends
    before the call returns) wait for the work named by their ``cuda_sync``
    event, or without one for the last work launched before them on every
    stream of the rank. ``cudaStreamWaitEvent`` makes the next work on its
    stream wait for the recorded work; it needs the sync event to be resolved.
    ``cudaEventQuery`` polls and is not a dependency.

    Args:
        launched_by: int64[N], the runtime call that launched each GPU node (-1).

    Returns:
        ``(awaited, waiter)`` node pairs.
    """
    lane_of = _gpu_lane_index(trace)
    by_rank: dict[int, list[int]] = {}
    for (r, _, _), lane in lane_of.items():
        by_rank.setdefault(r, []).append(lane)
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    copies = np.flatnonzero(role == Role.COPY)
    gpu_of_copy = lookup(launched_by.astype(np.int64), np.arange(len(launched_by)), copies.astype(np.int64))
    blocking_copy = (gpu_of_copy >= 0) & (end[np.maximum(gpu_of_copy, 0)] <= end[copies] + _COPY_TOL_NS)
    src.append(gpu_of_copy[blocking_copy])
    dst.append(copies[blocking_copy])
    calls = np.flatnonzero((kind == NodeKind.RUNTIME) & np.isin(role, (Role.SYNC, Role.STREAM_WAIT)))
    info = _sync_info(trace, rank, correlation, calls)
    record_start = _record_starts(kind, role, rank, start, correlation, info["wait_record"], calls)
    # (waiter, lane, time): the waiter waits for the last work launched on lane before time;
    # a stream wait's waiter is the first work launched on its own stream after the call
    waits: list[tuple[int, int, int]] = []
    stream_waits: list[tuple[int, int, int, int]] = []
    for i, call in enumerate(calls.tolist()):
        r, sk, dev = int(rank[call]), int(info["kind"][i]), int(info["device"][i])
        if sk == SyncKind.STREAM_WAIT or (sk == SyncKind.EVENT and record_start[i] >= 0):
            lane_w = lane_of.get((r, dev, int(info["wait_stream"][i])))
            if lane_w is None or record_start[i] < 0:
                continue
            if sk == SyncKind.EVENT:
                waits.append((call, lane_w, int(record_start[i])))
            elif (lane_s := lane_of.get((r, dev, int(info["stream"][i])))) is not None:
                stream_waits.append((lane_w, int(record_start[i]), lane_s, int(start[call])))
        elif role[call] == Role.SYNC:
            stream = int(info["stream"][i]) if sk == SyncKind.STREAM else None
            lanes = [lane_of[(r, dev, stream)]] if (r, dev, stream) in lane_of else by_rank.get(r, [])
            waits += [(call, lane, int(start[call])) for lane in lanes]
    for waiter, awaited in (_resolve_waits(gpu, waits), _resolve_stream_waits(gpu, stream_waits)):
        ok = (awaited >= 0) & (waiter >= 0)
        src.append(awaited[ok])
        dst.append(waiter[ok])
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)


def _resolve_waits(gpu: GpuNodes, waits: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(waiter, awaited) for each (waiter, lane, time): the last work launched on lane before time."""
    arr = np.array(waits, dtype=np.int64).reshape(-1, 3)
    awaited = np.full(len(arr), -1, dtype=np.int64)
    for lane, at in positions_by(arr[:, 1]).items():
        awaited[at] = gpu.last_before(lane, arr[at, 2])
    return arr[:, 0], awaited


def _resolve_stream_waits(gpu: GpuNodes, waits: list[tuple[int, int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(waiter, awaited) for each (recorded lane, record time, waiting lane, call time)."""
    arr = np.array(waits, dtype=np.int64).reshape(-1, 4)
    waiter = np.full(len(arr), -1, dtype=np.int64)
    for lane, at in positions_by(arr[:, 2]).items():
        waiter[at] = gpu.first_after(lane, arr[at, 3])
    return waiter, _resolve_waits(gpu, [(0, int(a), int(b)) for a, b, _, _ in arr.tolist()])[1]


def _record_starts(
    kind: np.ndarray, role: np.ndarray, rank: np.ndarray, start: np.ndarray, correlation: np.ndarray,
    wait_record: np.ndarray, calls: np.ndarray,
) -> np.ndarray:
    """Start time of the ``cudaEventRecord`` each waiting call refers to (-1 if unknown)."""
    records = np.flatnonzero((kind == NodeKind.RUNTIME) & (role == Role.EVENT_RECORD))
    found = lookup(rank_key(rank[records], correlation[records]), records, rank_key(rank[calls], wait_record))
    return np.where((found >= 0) & (wait_record >= 0), start[np.maximum(found, 0)], -1)


STREAM_WAKE_TOL_NS = 20_000
LATE_START_NS = 50_000


def inferred_stream_waits(
    rank: np.ndarray, lane: np.ndarray, start: np.ndarray, end: np.ndarray, launch_ns: np.ndarray,
    gpu_nodes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """GPU work that started late on an idle stream, right after work on another stream ended.

    Without ``cuda_sync`` events a ``cudaStreamWaitEvent`` cannot be resolved; the
    waiting stream then starts its next work a few µs after the awaited work on
    the other stream ends (an NCCL collective, a copy). Such a start is late:
    well after both its launch and the end of the previous work on its stream.

    Returns:
        ``(awaited, waiter)`` node pairs.
    """
    nodes = gpu_nodes[np.lexsort((start[gpu_nodes], lane[gpu_nodes]))]
    prev_end = np.full(len(nodes), np.iinfo(np.int64).min, dtype=np.int64)
    same = lane[nodes[1:]] == lane[nodes[:-1]]
    prev_end[1:][same] = end[nodes[:-1]][same]
    ready = np.maximum(prev_end, launch_ns[nodes])
    late = nodes[start[nodes] - ready > LATE_START_NS]
    by_end = gpu_nodes[np.lexsort((end[gpu_nodes], rank[gpu_nodes]))]
    key = rank[by_end].astype(np.int64) << 40 | np.maximum(end[by_end], 0)
    pos = np.searchsorted(key, rank[late].astype(np.int64) << 40 | start[late], side="right") - 1
    src, dst = [], []
    for back in range(3):  # skip candidates on the waiting stream itself
        p = pos - back
        ok = p >= 0
        cand = by_end[np.maximum(p, 0)]
        ok &= (rank[cand] == rank[late]) & (lane[cand] != lane[late])
        ok &= (end[cand] <= start[late]) & (start[late] - end[cand] <= STREAM_WAKE_TOL_NS)
        if src:
            ok &= ~np.isin(late, np.concatenate(dst))
        src.append(cand[ok])
        dst.append(late[ok])
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)
