"""Trace → ExecGraph: nodes, nesting, and every typed edge of DESIGN.

Nesting is one stack pass per lane; launches join on correlation ids; syncs
come from ``cuda_sync`` events or from the blocking call's name; collectives
are matched across ranks; gloo ops are tied to the c10d call that issued them
and to the point where the issuing thread resumed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph._kernels import lane_nesting
from bottleneck_oracle.graph.collectives import (
    CollectiveMatch,
    CommNodes,
    comm_nodes,
    completion_ns,
    last_arrival_ns,
    match_collectives,
    pair_gloo_calls,
)
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.grouping import positions_by
from bottleneck_oracle.graph.handoffs import handoff_edges, idle_resumes
from bottleneck_oracle.graph.host_waits import host_wait_edges
from bottleneck_oracle.graph.job_collectives import JobCollectives
from bottleneck_oracle.graph.links import GpuNodes, inferred_stream_waits, launch_edges, queued_before_trace, sync_edges
from bottleneck_oracle.graph.names import classify_names, p2p_direction
from bottleneck_oracle.graph.steps import assign_steps, find_steps
from bottleneck_oracle.graph.types import EdgeType, NodeKind, Role
from bottleneck_oracle.traces import EventKind, Trace

__all__ = ["build_graph", "comm_keys", "resumes"]

log = logging.getLogger(__name__)

NEST_TOL_NS = 1_000  # rounding of epoch-float timestamps breaks nesting by < 1 µs
RESUME_TOL_NS = 10_000
RESUME_LEAD_NS = 1_000_000  # a gloo worker closes its span up to ~1 ms after its waiter went on
WAIT_NS = 1_000_000  # ...when the waiter idled at least this long before it went on
FLOW_TOL_NS = 1_000
_NODE_KIND = {
    EventKind.CPU_OP: NodeKind.CPU_OP, EventKind.ANNOTATION: NodeKind.ANNOTATION,
    EventKind.PYTHON: NodeKind.PYTHON, EventKind.RUNTIME: NodeKind.RUNTIME,
    EventKind.KERNEL: NodeKind.KERNEL, EventKind.MEMCPY: NodeKind.MEMCPY, EventKind.MEMSET: NodeKind.MEMSET,
}
_META_NAMES = ("record_param_comms", "c10d::")


def _node_kinds(ev_kind: np.ndarray, comm_kernel: np.ndarray, gloo_op: np.ndarray) -> np.ndarray:
    table = np.full(16, -1, dtype=np.int8)
    for k, v in _NODE_KIND.items():
        table[k] = v
    kind = table[ev_kind]
    # gloo ops are user annotations; PyTorch 1.10-1.12 recorded them as cpu_op
    comm = (comm_kernel & (kind == NodeKind.KERNEL)) | (gloo_op & np.isin(kind, (NodeKind.ANNOTATION, NodeKind.CPU_OP)))
    kind[comm] = NodeKind.COMM
    return kind


def _sibling_edges(lane: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Consecutive children of one parent on one lane (nodes are in lane/start order)."""
    idx = np.lexsort((np.arange(len(lane)), parent, lane))
    same = (lane[idx[1:]] == lane[idx[:-1]]) & (parent[idx[1:]] == parent[idx[:-1]])
    return idx[:-1][same], idx[1:][same]


def _meta_events(trace: Trace, graph_kind: np.ndarray, event: np.ndarray, parent: np.ndarray,
                 launched_by: np.ndarray) -> np.ndarray:
    """Event row holding each comm kernel's collective args: itself, or the c10d/record_param_comms
    op around the call that launched it."""
    ev = trace.events
    meta = event.copy()
    names = trace.strings
    for node in np.flatnonzero((graph_kind == NodeKind.COMM) & (launched_by >= 0)).tolist():
        row = event[node]
        if ev.comms_id[row] > 0 or ev.coll_seq[row] >= 0 or ev.pg_name[row] > 0:
            continue
        up = int(parent[launched_by[node]])
        while up >= 0:
            if names[ev.name[event[up]]].startswith(_META_NAMES):
                meta[node] = event[up]
                break
            up = int(parent[up])
    return meta


def _lane_ranges(lane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids, first = np.unique(lane, return_index=True)
    last = np.append(first[1:], len(lane))
    lo = np.zeros(lane.max() + 1 if len(lane) else 0, dtype=np.int64)
    hi = np.zeros_like(lo)
    lo[ids], hi[ids] = first, last
    return lo, hi


def _resume_edges(lane: np.ndarray, start: np.ndarray, end: np.ndarray, waiter_lane: np.ndarray,
                  gloo: np.ndarray, same_lane_ok: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """gloo op → first node on the waiting thread that starts after the op completed (``end``)."""
    if not same_lane_ok:  # on its own thread program order rules
        waiter_lane = np.where(waiter_lane == lane[gloo], -1, waiter_lane)
    resumer = resumes(lane, start, waiter_lane, end[gloo])
    return gloo[resumer >= 0].astype(np.int64), resumer[resumer >= 0]


def resumes(lane: np.ndarray, start: np.ndarray, waiter_lane: np.ndarray, done: np.ndarray) -> np.ndarray:
    """int64 per op: the first node on its waiting thread (``waiter_lane``, -1: none) that starts after the op
    completed (``done``); -1: none."""
    lo, hi = _lane_ranges(lane)
    out = np.full(len(done), -1, dtype=np.int64)
    for i, (wl, d) in enumerate(zip(waiter_lane.tolist(), done.tolist())):
        if wl < 0:
            continue
        a, b = lo[wl], hi[wl]
        k = a + np.searchsorted(start[a:b], d - RESUME_TOL_NS, side="left")
        if k < b:
            out[i] = k
    return out


def _main_lanes(trace: Trace, kind: np.ndarray, role: np.ndarray, rank: np.ndarray,
                lane: np.ndarray) -> np.ndarray:
    """Per rank, the thread of its ProfilerStep annotations, else the one with most CPU ops."""
    main = np.full(max((i.rank for i in trace.ranks), default=0) + 1, -1, dtype=np.int64)
    is_step, is_op = role == Role.STEP, kind == NodeKind.CPU_OP
    step_lanes, op_lanes = lane[is_step], lane[is_op]
    steps, ops = positions_by(rank[is_step]), positions_by(rank[is_op])
    for info in trace.ranks:
        pick = step_lanes[steps[info.rank]] if info.rank in steps else op_lanes[ops.get(info.rank, [])]
        if len(pick):
            main[info.rank] = np.bincount(pick).argmax()
    return main


def _flow_edges(trace: Trace, lane: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fwdbwd flows bound to the op that starts at each endpoint on its thread."""
    fl = trace.flows
    if not len(fl) or not len(lane):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, hi = _lane_ranges(lane)
    bound = np.full(len(fl), -1, dtype=np.int64)
    for i in np.flatnonzero(fl.is_fwdbwd & (fl.lane >= 0) & (fl.lane < len(lo))).tolist():
        a, b = lo[fl.lane[i]], hi[fl.lane[i]]
        k = a + np.searchsorted(start[a:b], fl.ts_ns[i] - FLOW_TOL_NS, side="left")
        if k < b and start[k] <= fl.ts_ns[i] + FLOW_TOL_NS:
            bound[i] = k
    key = fl.rank.astype(np.int64) << 40 | (fl.flow_id & ((1 << 40) - 1))
    starts = {int(k): int(b) for k, b, s in zip(key, bound, fl.is_start) if s and b >= 0}
    pairs = [(starts[int(k)], int(b)) for k, b, s in zip(key, bound, fl.is_start)
             if not s and b >= 0 and int(k) in starts and starts[int(k)] != b]
    arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


@dataclass(frozen=True, slots=True)
class _Nodes:
    """Node columns in lane order, with each lane's program-order chain (from ``lane_nesting``)."""

    event: np.ndarray
    kind: np.ndarray
    role: np.ndarray
    rank: np.ndarray
    lane: np.ndarray
    name: np.ndarray
    start: np.ndarray
    end: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    overlaps: int
    chain: tuple[np.ndarray, np.ndarray, np.ndarray]


def _nodes(trace: Trace) -> _Nodes:
    """Node rows, sorted by lane, start, -duration: every event but sync records, GPU labels and
    Python frames. A ``with_stack`` frame is no work of its own, and its span does not nest with the
    ops it calls (``profiler.py: step`` opens before its ``ProfilerStep#N`` and closes just after the
    step began): nested with them, it would cut the step to a few µs."""
    ev = trace.events
    role_s, comm_kernel, gloo_op = classify_names(trace.strings)
    rows = np.flatnonzero(~np.isin(ev.kind, (EventKind.SYNC, EventKind.GPU_ANNOTATION, EventKind.PYTHON)))
    rows = rows[np.lexsort((rows, -ev.dur_ns[rows], ev.start_ns[rows], ev.lane[rows]))]
    lane = ev.lane[rows]
    start = ev.start_ns[rows]
    window_end = np.zeros(max((info.rank for info in trace.ranks), default=-1) + 1, dtype=np.int64)  # empty ranks too
    for info in trace.ranks:
        window_end[info.rank] = info.window_end_ns
    # spans that run past the recording window (a bogus last ProfilerStep) end with it
    end = np.maximum(np.minimum(start + ev.dur_ns[rows], window_end[ev.rank[rows]]), start)
    parent, depth, end, overlaps, c_src, c_dst, c_owner = lane_nesting(lane, start, end, NEST_TOL_NS)
    names = ev.name[rows]
    return _Nodes(
        event=rows.astype(np.int64), kind=_node_kinds(ev.kind[rows], comm_kernel[names], gloo_op[names]),
        role=role_s[names].copy(), rank=ev.rank[rows], lane=lane, name=names, start=start,
        end=end, parent=parent, depth=depth, overlaps=int(overlaps), chain=(c_src, c_dst, c_owner),
    )


def _edges(parts: list[tuple[np.ndarray, np.ndarray, EdgeType]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    parts = [(s, d, t) for s, d, t in parts if len(s)]
    src = np.concatenate([s for s, _, _ in parts]).astype(np.int32) if parts else np.zeros(0, np.int32)
    dst = np.concatenate([d for _, d, _ in parts]).astype(np.int32) if parts else np.zeros(0, np.int32)
    typ = np.concatenate([np.full(len(s), t, dtype=np.int8) for s, _, t in parts]) if parts else np.zeros(0, np.int8)
    # an inferred wait against a wait or a collective edge the other way would make a cycle: an eager gloo
    # send done before its receive was posted (the collective already orders the two), or two zero-length
    # ops at one instant in a damaged trace, each inferred to wait for the other. (A blocking copy's wait
    # against its launch is no cycle: one leaves the copy's end, the other its call's start.)
    key, back = src.astype(np.int64) << 32 | dst, dst.astype(np.int64) << 32 | src
    ordering = (typ == EdgeType.SYNC) | (typ == EdgeType.COLLECTIVE)
    kept = (typ != EdgeType.SYNC) | ~np.isin(key, back[ordering])
    return src[kept], dst[kept], typ[kept]


Parts = list[tuple[np.ndarray, np.ndarray, EdgeType]]


def _gpu_links(trace: Trace, nd: _Nodes, is_gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, Parts]:
    """Launch and sync edges, and the host's waits on the GPU that no call names; returns the launching call
    and launch time of every node too, and the GPU work queued before the trace."""
    kind, role, rank, start, end = nd.kind, nd.role, nd.rank, nd.start, nd.end
    corr = trace.events.correlation[nd.event]
    calls, launched = launch_edges(kind, rank, corr, is_gpu)
    launched_by = np.full(len(kind), -1, dtype=np.int64)
    launched_by[launched] = calls
    launch_ns = start.copy()
    launch_ns[launched] = start[calls]
    queued = queued_before_trace(nd.lane, start, end, is_gpu, launched_by)
    # a synchronize waits for what was queued before the trace too, whenever that runs
    gpu = GpuNodes(nd.lane, np.where(queued, np.iinfo(np.int64).min, launch_ns),
                   np.flatnonzero(is_gpu & (nd.parent < 0)))
    awaited, waiter = sync_edges(trace, kind, role, rank, start, end, corr, gpu, launched_by)
    role[waiter[role[waiter] == Role.COPY]] = Role.SYNC  # a copy whose call waits for it blocks
    inferred = inferred_stream_waits(rank, nd.lane, start, end, launch_ns, gpu.nodes)
    drained = host_wait_edges(nd.chain, kind, rank, nd.lane, start, end, ~is_gpu, gpu)
    return launched_by, launch_ns, queued, [(calls, launched, EdgeType.LAUNCH), (awaited, waiter, EdgeType.SYNC),
                                            (*inferred, EdgeType.SYNC), (*drained, EdgeType.SYNC)]


def _gloo_links(trace: Trace, nd: _Nodes, is_gpu: np.ndarray, coll: CollectiveMatch, c10d: np.ndarray,
                gloo: np.ndarray, done: np.ndarray, arrived: np.ndarray) -> Parts:
    """A gloo op's completion (``done``: its instance's first member's end; ``arrived``: its last member's
    start) → where its issuing thread resumed."""
    kind, rank, lane, start = nd.kind, nd.rank, nd.lane, nd.start
    all_gloo = np.flatnonzero((kind == NodeKind.COMM) & ~is_gpu)
    issuer = dict(zip(gloo.tolist(), c10d.tolist()))
    main_lane = _main_lanes(trace, kind, nd.role, rank, lane)
    waiter_lane = np.array(
        [lane[issuer[g]] if g in issuer else main_lane[rank[g]] for g in all_gloo.tolist()], dtype=np.int64
    )
    # the issuing thread resumes when the collective completes (its first member ends): a gloo
    # worker may close its own span ms later, after the main thread has moved on
    _end_at_early_resumes(nd, all_gloo, waiter_lane, done, arrived, ~is_gpu)
    done = np.minimum(done, completion_ns(coll.instance, coll.table.reliable, nd.end))
    resumed_by, resumer = _resume_edges(lane, start, done, waiter_lane, all_gloo)
    # a gloo receive only posts the buffer; its thread waits after it until the peer's send lands
    sends, receives = _p2p_pairs(trace, nd, coll)
    sent_by, received = _resume_edges(lane, start, nd.end, lane[receives], sends, same_lane_ok=True)
    return [(resumed_by, resumer, EdgeType.SYNC), (sent_by, received, EdgeType.SYNC)]


def _end_at_early_resumes(nd: _Nodes, gloo: np.ndarray, waiter_lane: np.ndarray, done: np.ndarray,
                          arrived: np.ndarray, cpu: np.ndarray) -> None:
    """Ends a gloo op where its waiting thread, idle for a while, resumed shortly before the op's span
    closed (the worker reports completion late): the data was there when the waiter went on.

    Shortly is 1 ms, or any time after the collective's last member arrived when no other op the
    thread waits on completed while it was idle: on a loaded machine both workers have closed their
    spans 4 ms after the waiting thread went on, past a 150 ms wait that then read as the thread's own
    idle time."""
    resumer, idle_since = idle_resumes(*nd.chain, nd.kind, nd.start, nd.end, cpu, WAIT_NS)
    order = np.lexsort((nd.start[resumer], nd.lane[resumer]))
    resumer, idle_since = resumer[order], idle_since[order]
    lane_of, start_of = nd.lane[resumer], nd.start[resumer]
    # per waiting thread, when each op it waits on completed, sorted: what else may have woken it
    done_on = {wl: np.sort(done[gloo[waiter_lane == wl]]) for wl in np.unique(waiter_lane[waiter_lane >= 0]).tolist()}
    for g, wl in zip(gloo.tolist(), waiter_lane.tolist()):
        if wl < 0 or wl == nd.lane[g]:
            continue
        lo, hi = np.searchsorted(lane_of, wl, side="left"), np.searchsorted(lane_of, wl, side="right")
        k = lo + np.searchsorted(start_of[lo:hi], done[g] - RESUME_TOL_NS, side="left") - 1  # last before done
        if k < lo or start_of[k] <= nd.start[g]:
            continue
        if start_of[k] >= done[g] - RESUME_LEAD_NS or (start_of[k] >= arrived[g] and not _woken_by_other(
                done_on[wl], idle_since[k], start_of[k])):
            nd.end[g] = min(nd.end[g], start_of[k])


def _woken_by_other(done_sorted: np.ndarray, idle_from: int, resumed: int) -> bool:
    """Whether an op the thread waits on completed while it was idle, up to its resume."""
    i = np.searchsorted(done_sorted, idle_from, side="left")
    return bool(i < len(done_sorted) and done_sorted[i] <= resumed + RESUME_TOL_NS)


def _p2p_pairs(trace: Trace, nd: _Nodes, coll: CollectiveMatch) -> tuple[np.ndarray, np.ndarray]:
    """(send, receive) gloo node pairs of each point-to-point instance."""
    members = np.flatnonzero(coll.instance >= 0)
    direction = np.array([p2p_direction(trace.strings[i]) for i in nd.name[members]])
    sends, recvs = members[direction == "send"], members[direction == "recv"]
    recv_of = dict(zip(coll.instance[recvs].tolist(), recvs.tolist()))
    pairs = [(s, recv_of[i]) for s, i in zip(sends.tolist(), coll.instance[sends].tolist()) if i in recv_of]
    arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _thread_edges(nd: _Nodes, is_gpu: np.ndarray) -> Parts:
    """Nesting, program order on threads and streams, data-loader hand-over, thread hand-offs."""
    lane, parent, role = nd.lane, nd.parent, nd.role
    sib_src, sib_dst = _sibling_edges(lane, parent)
    on_gpu = is_gpu[sib_src]
    loads = role[sib_src] == Role.DATALOADER
    nest = np.flatnonzero(parent >= 0)
    handed, resumed = handoff_edges(*nd.chain, nd.kind, nd.rank, lane, nd.start, nd.end, ~is_gpu)
    return [(parent[nest], nest, EdgeType.NEST), (sib_src[~on_gpu], sib_dst[~on_gpu], EdgeType.THREAD_NEXT),
            (sib_src[on_gpu], sib_dst[on_gpu], EdgeType.STREAM_NEXT),
            (sib_src[loads], sib_dst[loads], EdgeType.DATALOAD), (handed, resumed, EdgeType.SYNC)]


def _recorded_dependencies(trace: Trace, nd: _Nodes) -> Parts:
    """Forward → backward flows and execution-trace data dependencies that cross threads."""
    lane = nd.lane
    fwd, bwd = _flow_edges(trace, lane, nd.start)
    node_of_event = np.full(len(trace.events), -1, dtype=np.int64)
    node_of_event[nd.event] = np.arange(len(lane))
    data = node_of_event[trace.data_deps] if len(trace.data_deps) else np.zeros((0, 2), np.int64)
    data = data[(data >= 0).all(axis=1)]
    # on one thread program order already orders producer and consumer
    data = data[lane[data[:, 0]] != lane[data[:, 1]]]
    cross = lane[fwd] != lane[bwd]
    return [(fwd[cross], bwd[cross], EdgeType.FWDBWD), (data[:, 0], data[:, 1], EdgeType.DATA)]


def _rank_local(trace: Trace):  # type: ignore[no-untyped-def]
    """What the graph's build reads of each rank alone: nodes, launch and sync links, the event holding each
    comm node's collective args, gloo ops paired with their c10d calls, and each gloo op's peer."""
    nd = _nodes(trace)
    is_gpu = trace.lanes.is_gpu[nd.lane]
    launched_by, launch_ns, queued, parts = _gpu_links(trace, nd, is_gpu)
    meta = _meta_events(trace, nd.kind, nd.event, nd.parent, launched_by)
    c10d, gloo = pair_gloo_calls(trace, nd.kind, nd.role, nd.rank, is_gpu, nd.name, nd.event, nd.start)
    peer = np.full(len(nd.kind), -1, dtype=np.int64)
    peer[gloo] = trace.events.peer[nd.event[c10d]]  # a gloo send/recv's peer, from its c10d call
    return nd, is_gpu, launched_by, launch_ns, queued, parts, meta, (c10d, gloo), peer


def comm_keys(trace: Trace) -> tuple[list[CommNodes], np.ndarray, np.ndarray]:
    """The comm nodes of ``trace`` (one rank's) with every key they could be matched by across ranks, and
    every node's start and end before a collective moves them (``job/summary.py``)."""
    nd, is_gpu, _, _, _, _, meta, _, peer = _rank_local(trace)
    return comm_nodes(trace, nd.kind, nd.rank, is_gpu, nd.name, meta, nd.start, peer, every=True), nd.start, nd.end


def build_graph(trace: Trace, steps_from: str | None = None, job: JobCollectives | None = None) -> ExecGraph:
    """Builds the execution DAG of every rank of ``trace``.

    Args:
        trace (Trace): the normalized trace (``read_trace``).
        steps_from (str | None): regex; the user annotations it matches are the steps
            instead of ``ProfilerStep#N``, numbered 0, 1, ... per rank.
        job (JobCollectives | None): for the trace of one rank of a job, its collectives as the job's other
            ranks matched them: its nodes, steps and times are then those of the job's graph, but it has no
            edge to another rank's work, and its resume edges take the raw completion of its collectives.

    Returns:
        ExecGraph: nodes, typed edges, steps and matched collectives.
    """
    nd, is_gpu, launched_by, launch_ns, queued, parts, meta, (c10d, gloo), peer = _rank_local(trace)
    if job is None:
        coll = match_collectives(trace, nd.kind, nd.rank, is_gpu, nd.name, meta, nd.start, nd.end, peer)
        done = completion_ns(coll.instance, coll.table.reliable, nd.end)
        arrived = last_arrival_ns(coll.instance, coll.table.reliable, nd.start)
    else:
        coll, done, arrived = job.match(nd.end)
    parts += [(c10d, gloo, EdgeType.LAUNCH)]
    parts += _gloo_links(trace, nd, is_gpu, coll, c10d, gloo, done, arrived) + _thread_edges(nd, is_gpu)
    parts += _recorded_dependencies(trace, nd)
    src, dst, typ = _edges(parts + [(coll.src, coll.dst, EdgeType.COLLECTIVE)])
    steps = find_steps(trace, nd.kind, nd.role, nd.rank, nd.name, nd.start, nd.end, steps_from)
    step_row, steps = assign_steps(steps, nd.rank, nd.start, nd.end, is_gpu, launched_by, queued)
    return ExecGraph(
        trace=trace, event=nd.event, kind=nd.kind, role=nd.role, rank=nd.rank, lane=nd.lane,
        name=nd.name, start_ns=nd.start, dur_ns=nd.end - nd.start, step_row=step_row,
        parent=nd.parent, depth=nd.depth, launch_ns=launch_ns, collective=coll.instance, edge_src=src,
        edge_dst=dst, edge_type=typ, steps=steps, collectives=coll.table, nesting_overlaps=nd.overlaps,
    )
