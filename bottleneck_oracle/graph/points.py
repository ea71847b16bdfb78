"""The point graph: every node's start and end as points, joined by weighted, categorised edges.

Point 2i is the start of node i, 2i+1 its end; then one point per reliable
collective instance (when its last member arrived) and a source at time 0.
Each lane contributes its program-order chain; launches, syncs, collectives,
flows and data dependencies join lanes. For every point the edge that
released it (the binding edge) is chosen from the observed times, and edges
are weighed so that a longest-path pass reproduces the trace exactly and
follows the binding edges: its path to a step's last point is the critical
path, and it covers every instant of the step's wall time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph import _kernels
from bottleneck_oracle.graph._kernels import BLOCKING, BUSY, COMM, CROSS, GAP, LANE_GAP
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.longest_path import EdgeIndex, index_edges
from bottleneck_oracle.graph.types import CATEGORIES, Category, EdgeType, NodeKind, Role

__all__ = ["InstanceTimes", "PointGraph", "build_point_graph", "WAKE_TOL_NS", "LANE", "SOURCE"]

LANE = -1  # origin of program-order edges along a lane
SOURCE = -2  # origin of edges from the source point

WAKE_TOL_NS = 1_000_000  # a thread that resumes within 1 ms of a dependency's end was waiting for it
COMM_TAIL_SHARE = 0.25  # of a collective's transfer: how late its waiter may resume and still be waiting for it
CONTRA_TOL_NS = 1_000
LAUNCH_LATENCY_NS = 100_000
GPU_CLOCK_LEAD_NS = 20_000  # how far a GPU's clock may read ahead of its host's (seen: 8 µs on MI300)
PAUSE_NS = 1_000_000  # an uncovered stretch this long inside a user range is a pause, not op dispatch  # a launch that took longer to start its work was not what it waited for
_C = {c: np.int8(i) for i, c in enumerate(CATEGORIES)}


@dataclass(frozen=True, slots=True)
class PointGraph:
    """Points, weighted edges and the binding (critical) predecessor of every point.

    Shapes:
        t: int64[P]; edge arrays: [E]; ``binding``: int64[P] (edge id, -1 at the source).
    """

    t: np.ndarray  # int64: time of each point
    node: np.ndarray  # int64: node of each point (-1 for virtual points)
    src: np.ndarray  # int64
    dst: np.ndarray  # int64
    weight: np.ndarray  # int64, -1 = contradicted by the data (absent from ``index``)
    category: np.ndarray  # int8: index into CATEGORIES
    owner: np.ndarray  # int64: node whose time the edge is (-1: none)
    origin: np.ndarray  # int8: EdgeType of the graph edge it comes from; LANE or SOURCE
    rank: np.ndarray  # int32: rank the edge's time is spent on
    binding: np.ndarray  # int64
    index: EdgeIndex
    contradicted: int


@dataclass(frozen=True, slots=True)
class RemoteWaits:
    """Threads of the graph that resumed when an op on another rank ended: a gloo send to a receive here.
    The edge of the k-th is owned by ``-2 - k`` (the op is no node of this graph).

    Args:
        row (np.ndarray): int64[S] the op's instance, a row of ``g.collectives``.
        waiter (np.ndarray): int64[S] the node that resumed.
        end_ns (np.ndarray): int64[S] when the op ended, on this graph's clock.
    """

    row: np.ndarray
    waiter: np.ndarray
    end_ns: np.ndarray


@dataclass(frozen=True, slots=True)
class InstanceTimes:
    """The times of a graph's collective instances, one per row of ``g.collectives``, where some of their
    members are not in the graph (the graph of one rank of a job, ``job/summary.py``).

    Args:
        first_end (np.ndarray): int64, the end of the instance's first member done, as the job's graph has it.
        last_start (np.ndarray): int64, the start of its last member to arrive.
        remote (RemoteWaits | None): the ops on other ranks that threads of the graph waited for.
    """

    first_end: np.ndarray
    last_start: np.ndarray
    remote: RemoteWaits | None = None

    @classmethod
    def of(cls, g: ExecGraph) -> InstanceTimes:
        """The times of the instances of ``g`` over its own members."""
        rel = g.collectives.reliable
        member = _reliable_members(g)
        first_end = np.full(len(rel), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_end, g.collective[member], g.end_ns[member])
        last_start = np.full(len(rel), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(last_start, g.collective[member], g.start_ns[member])
        return cls(first_end, last_start)


def _reliable_members(g: ExecGraph) -> np.ndarray:
    """The nodes that are members of a reliable collective instance of ``g``."""
    rel = g.collectives.reliable
    return np.flatnonzero((g.collective >= 0) & (rel[np.maximum(g.collective, 0)] if len(rel) else False))


def _chain_edges(g: ExecGraph, reliable_member: np.ndarray, transfer: np.ndarray):  # type: ignore[no-untyped-def]
    """Program-order edges of every lane, with their mode, minimum lag and category."""
    start, end = g.start_ns, g.end_ns
    _, _, _, _, src, dst, owner = _kernels.lane_nesting(g.lane, start, end, np.int64(0))
    t = np.empty(2 * len(g), dtype=np.int64)
    t[0::2], t[1::2] = start, end
    obs = t[dst] - t[src]
    o = np.maximum(owner, 0)
    has = owner >= 0
    kind = np.where(has, g.kind[o], -1)
    role = np.where(has, g.role[o], -1)
    gpu = g.trace.lanes.is_gpu[g.lane[src // 2]]
    in_loader = g.under(g.role == Role.DATALOADER)[o] & has
    mode = np.full(len(src), BUSY, dtype=np.int8)
    cat = np.full(len(src), _C[Category.CPU], dtype=np.int8)
    # CPU gaps: no op, or only an annotation / Python frame open → host time, unless a wake-up explains it
    gap = ~gpu & (~has | (kind == NodeKind.ANNOTATION) | (kind == NodeKind.PYTHON))
    mode[gap] = GAP
    # a short gap inside a user range is Python between its ops; a long one is a pause (GC, sleep,
    # I/O, unprofiled code), as is any gap with no range open but the step
    long_gap = obs >= PAUSE_NS
    cat[gap & (~has | (role == Role.STEP) | ((kind == NodeKind.ANNOTATION) & long_gap))] = _C[Category.IDLE]
    sync = has & (kind == NodeKind.RUNTIME) & (role == Role.SYNC)
    mode[sync], cat[sync] = BLOCKING, _C[Category.SYNC_WAIT]
    api = has & (kind == NodeKind.RUNTIME) & np.isin(role, (Role.LAUNCH, Role.COPY, Role.EVENT_RECORD, Role.STREAM_WAIT))
    cat[api] = _C[Category.LAUNCH_OVERHEAD]
    cat[in_loader] = _C[Category.DATA_LOADING]
    lane_gap = gpu & ~has
    mode[lane_gap], cat[lane_gap] = LANE_GAP, _C[Category.LAUNCH_OVERHEAD]
    cat[gpu & has] = _C[Category.GPU_COMPUTE]
    comm = has & (kind == NodeKind.COMM)
    cat[comm] = _C[Category.COMMUNICATION]
    member = comm & reliable_member[o]
    mode[member] = COMM
    minlag = obs.copy()
    minlag[(mode == GAP) | (mode == BLOCKING) | (mode == LANE_GAP)] = 0
    minlag[member] = np.minimum(transfer[o[member]], obs[member])
    return src, dst, mode, minlag, cat, np.where(has, owner, -1).astype(np.int64)


def _cross_edges(g: ExecGraph, arrival_point: np.ndarray, transfer: np.ndarray, first_end: np.ndarray,  # type: ignore[no-untyped-def]
                 remote: tuple | None):  # type: ignore[type-arg]
    """Launch, sync, flow and data edges between lanes, as point edges.

    A thread waiting for a collective resumes when the collective completes: its wait
    edge leaves the instance's arrival point with the instance's transfer time as lag.
    """
    gpu_node = g.trace.lanes.is_gpu[g.lane]
    out = []
    s, d = g.edges_of(EdgeType.LAUNCH)
    cat = np.where(g.kind[s] == NodeKind.RUNTIME, _C[Category.LAUNCH_OVERHEAD], _C[Category.COMMUNICATION])
    out.append((2 * s, 2 * d, cat, s, EdgeType.LAUNCH, np.zeros(len(s), np.int64)))
    s, d = g.edges_of(EdgeType.SYNC)
    # between two members of one matched instance (an eager gloo send done before its receive was posted)
    # the instance's own edges already order them; the edge would loop through its arrival point
    apart = (arrival_point[s] < 0) | (g.collective[s] != g.collective[d])
    s, d = s[apart], d[apart]
    via = (arrival_point[s] >= 0) & ~gpu_node[s]  # gloo: the worker may close its span late
    done = np.where(via, first_end[np.maximum(g.collective[s], 0)] if len(first_end) else 0, g.end_ns[s])
    # into the waiter's end when it was already running as the awaited work completed (a blocking
    # call, a range that closes on resume), else into its start
    blocking = (g.kind[d] == NodeKind.RUNTIME) & (g.role[d] == Role.SYNC)
    into_end = blocking | (g.start_ns[d] < done - CONTRA_TOL_NS)
    cat = np.where(gpu_node[s], _C[Category.SYNC_WAIT],
                   np.where(g.kind[s] == NodeKind.COMM, _C[Category.COMMUNICATION], _C[Category.CPU]))
    # a blocking call that returned before its awaited work ended, by less than a GPU clock's lead on the
    # host's (MI300: 1-8 µs): the wait leaves the work's start and is that work's own time, so a replay scales
    # it with the work
    skewed = blocking & gpu_node[s] & (g.end_ns[s] > g.end_ns[d]) & (g.end_ns[s] - g.end_ns[d] <= GPU_CLOCK_LEAD_NS)
    skewed &= g.start_ns[s] < g.end_ns[d]
    cat = np.where(skewed & (g.kind[s] != NodeKind.COMM), _C[Category.GPU_COMPUTE], cat)
    # the time of a wait belongs to the waiter, except after a collective (it is communication)
    lag = np.where(via, transfer[s], np.where(skewed, g.end_ns[d] - g.start_ns[s], 0))
    out.append((np.where(via, arrival_point[s], 2 * s + 1 - skewed), 2 * d + into_end, cat,
                np.where((g.kind[s] == NodeKind.COMM) | skewed, s, d), EdgeType.SYNC, lag))
    if remote is not None:
        out.append(remote)
    for etype in (EdgeType.FWDBWD, EdgeType.DATA):
        s, d = g.edges_of(etype)
        out.append((2 * s + 1, 2 * d, np.full(len(s), _C[Category.CPU]), d, etype, np.zeros(len(s), np.int64)))
    src = np.concatenate([o[0] for o in out]).astype(np.int64)
    dst = np.concatenate([o[1] for o in out]).astype(np.int64)
    cat = np.concatenate([np.asarray(o[2], dtype=np.int8).reshape(-1) for o in out])
    owner = np.concatenate([o[3] for o in out]).astype(np.int64)
    origin = np.concatenate([np.full(len(o[0]), o[4], dtype=np.int8) for o in out])
    minlag = np.concatenate([o[5] for o in out]).astype(np.int64)
    return src, dst, cat, owner, origin, minlag


def _collective_edges(g: ExecGraph, first_point: int, times: InstanceTimes):  # type: ignore[no-untyped-def]
    """Members' starts → one arrival point per reliable instance → members' ends."""
    rel = g.collectives.reliable
    member = _reliable_members(g)
    compact = np.full(len(rel), -1, dtype=np.int64)
    compact[rel] = np.arange(int(rel.sum()))
    point = first_point + compact[g.collective[member]]
    arrival = times.last_start[rel]
    # the lag every member's end has on the last arrival: from it to the first member done
    transfer = np.maximum(times.first_end - times.last_start, 0)
    k = len(member)
    src = np.concatenate([2 * member, point]).astype(np.int64)
    dst = np.concatenate([point, 2 * member + 1]).astype(np.int64)
    minlag = np.concatenate([np.zeros(k, np.int64), transfer[g.collective[member]]])
    owner = np.concatenate([member, member]).astype(np.int64)
    is_member = np.zeros(len(g), dtype=bool)
    is_member[member] = True
    node_transfer = np.zeros(len(g), dtype=np.int64)
    node_transfer[member] = transfer[g.collective[member]]
    node_point = np.full(len(g), -1, dtype=np.int64)
    node_point[member] = point
    return src, dst, minlag, owner, arrival, is_member, node_transfer, node_point


def _remote_edges(g: ExecGraph, times: InstanceTimes, first_point: int, first_virtual: int):  # type: ignore[no-untyped-def]
    """The waits of ``times.remote`` as the job's graph has them (``_cross_edges``' sync edges from a gloo op):
    from the instance's arrival point when it is reliable, else from the op's end, here a point of its own
    (the ``first_virtual``-th on), with no edge into it."""
    r = times.remote
    assert r is not None
    rel = g.collectives.reliable
    compact = np.cumsum(rel) - 1
    via = rel[r.row]
    k = np.flatnonzero(~via | (g.collective[r.waiter] != r.row))  # not into a member of its own instance
    row, d = r.row[k], r.waiter[k]
    done = np.where(via[k], times.first_end[row], r.end_ns[k])
    into_end = ((g.kind[d] == NodeKind.RUNTIME) & (g.role[d] == Role.SYNC)) | (g.start_ns[d] < done - CONTRA_TOL_NS)
    transfer = np.maximum(times.first_end[row] - times.last_start[row], 0)
    src = np.where(via[k], first_point + compact[row], first_virtual + k)
    return (src, 2 * d + into_end, np.full(len(k), _C[Category.COMMUNICATION]), -2 - k, EdgeType.SYNC,
            np.where(via[k], transfer, 0)), r.end_ns


def _all_edges(g: ExecGraph, times: InstanceTimes):  # type: ignore[no-untyped-def]
    """Every point edge: the lanes' chains, the edges between lanes and the collectives' edges, as
    one set of columns (with its mode and minimum lag), and the times of the points after the nodes' (the
    collective instances' arrivals, then the ends of ops on other ranks waited for). Its parts are freed on
    return: on a large job they are a third of the point graph's peak memory."""
    c_src, c_dst, c_lag, c_owner, arrival, is_member, transfer, arrival_point = _collective_edges(g, 2 * len(g), times)
    remote = None
    if times.remote is not None:
        remote, ends = _remote_edges(g, times, 2 * len(g), 2 * len(g) + len(arrival))
        arrival = np.concatenate([arrival, ends])  # the points of ops on other ranks follow the arrival points
    h_src, h_dst, h_mode, h_lag, h_cat, h_owner = _chain_edges(g, is_member, transfer)
    x_src, x_dst, x_cat, x_owner, x_origin, x_lag = _cross_edges(g, arrival_point, transfer, times.first_end, remote)
    src = np.concatenate([h_src, x_src, c_src])
    dst = np.concatenate([h_dst, x_dst, c_dst])
    mode = np.concatenate([h_mode, np.full(len(x_src) + len(c_src), CROSS, np.int8)])
    minlag = np.concatenate([h_lag, x_lag, c_lag])
    cat = np.concatenate([h_cat, x_cat, np.full(len(c_src), _C[Category.COMMUNICATION], np.int8)])
    owner = np.concatenate([h_owner, x_owner, c_owner])
    origin = np.concatenate([np.full(len(h_src), LANE, np.int8), x_origin,
                             np.full(len(c_src), EdgeType.COLLECTIVE, np.int8)])
    return arrival, src, dst, mode, minlag, cat, owner, origin


def _select_binding(t: np.ndarray, src: np.ndarray, dst: np.ndarray, mode: np.ndarray, minlag: np.ndarray):  # type: ignore[no-untyped-def]
    """``_kernels.select_binding`` over the in-edges of every point (their index freed on return)."""
    in_ptr, in_order = _kernels.csr(dst, len(t))
    return _kernels.select_binding(t, src, mode, minlag, in_ptr, in_order, np.int64(WAKE_TOL_NS),
                                   np.int64(CONTRA_TOL_NS))


def build_point_graph(g: ExecGraph, instances: InstanceTimes | None = None) -> PointGraph:
    """Weighs the point graph of ``g`` from its observed times and picks binding edges.

    Args:
        instances (InstanceTimes | None): the times of its collective instances where some members are
            elsewhere (default: over its own members).

    Raises:
        GraphError: the graph has a cycle.
    """
    n = len(g)
    arrival, src, dst, mode, minlag, cat, owner, origin = _all_edges(g, instances or InstanceTimes.of(g))
    n_points = 2 * n + len(arrival) + 1
    source = n_points - 1
    t = np.empty(n_points, dtype=np.int64)
    t[0 : 2 * n : 2], t[1 : 2 * n : 2] = g.start_ns, g.end_ns
    t[2 * n : source] = arrival
    t[source] = min(int(t[:source].min()) if source else 0, 0)
    weight, binding, late_wake, contradicted = _select_binding(t, src, dst, mode, minlag)
    # a thread released by a dependency that then stayed idle: the wait is its own, not the edge's;
    # after a collective, a wake-up within its tail is still the collective's (``_collective_tail``)
    woke_late = binding[late_wake]
    woke_late = woke_late[~_collective_tail(g, t, src, dst, owner, origin, minlag, woke_late)]
    cat[woke_late] = _C[Category.IDLE]
    owner[woke_late] = -1
    unbound = np.flatnonzero(binding[:source] < 0)
    e0 = len(src)
    src = np.concatenate([src, np.full(len(unbound), source)])
    dst = np.concatenate([dst, unbound])
    weight = np.concatenate([weight, t[unbound] - t[source]])
    cat = np.concatenate([cat, np.full(len(unbound), _C[Category.IDLE], np.int8)])
    owner = np.concatenate([owner, np.full(len(unbound), -1)])
    origin = np.concatenate([origin, np.full(len(unbound), SOURCE, np.int8)])
    binding[unbound] = np.arange(e0, e0 + len(unbound))
    # GPU work that starts long after its launch on an idle stream waited for something the
    # trace does not show (an event on another stream, a graph-internal dependency): idle,
    # owned by the work that waited
    late = np.flatnonzero((cat == _C[Category.LAUNCH_OVERHEAD]) & (weight > LAUNCH_LATENCY_NS))
    late = late[(binding[dst[late]] == late) & (mode[late] != BUSY)]
    # a slow launch call explains a late start up to the call's own end
    launch = late[owner[late] >= 0]
    explained = t[dst[launch]] - g.end_ns[owner[launch]] <= LAUNCH_LATENCY_NS
    late = np.setdiff1d(late, launch[explained])
    cat[late] = _C[Category.IDLE]
    owner[late] = dst[late] // 2
    return _finish(g, t, src, dst, weight, cat, owner, origin, binding, contradicted)


def _collective_tail(g: ExecGraph, t: np.ndarray, src: np.ndarray, dst: np.ndarray, owner: np.ndarray,
                     origin: np.ndarray, minlag: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """bool per edge of ``edges``: a thread's wait on a collective that it left within the collective's
    tail, ``COMM_TAIL_SHARE`` of its transfer after the collective's span closed. A gloo worker closes
    its span before the result is back in the caller's hands, and on a loaded machine the caller is
    scheduled late; the caller times all of it as the collective (a blocking 128 MB all-reduce: 198 ms
    in the worker's span, 22 ms more before the main thread ran on, 220 ms timed by the caller)."""
    o = np.maximum(owner[edges], 0)
    remote = owner[edges] <= -2  # an op on another rank (``RemoteWaits``): a gloo send
    comm = (origin[edges] == EdgeType.SYNC) & (((owner[edges] >= 0) & (g.kind[o] == NodeKind.COMM)) | remote)
    lateness = t[dst[edges]] - t[src[edges]] - minlag[edges]
    return comm & (lateness <= COMM_TAIL_SHARE * minlag[edges])


def _finish(g: ExecGraph, t, src, dst, weight, cat, owner, origin, binding, contradicted) -> PointGraph:  # type: ignore[no-untyped-def]
    """Indexes the graph without its contradicted edges, binding edges first (they win ties)."""
    n_points = len(t)
    is_binding = np.zeros(len(src), dtype=bool)
    is_binding[binding[binding >= 0]] = True
    node = np.full(n_points, -1, dtype=np.int64)
    node[: 2 * len(g)] = np.arange(2 * len(g)) // 2
    edge_node = np.where(node[dst] >= 0, node[dst], node[src])
    return PointGraph(
        t=t, node=node, src=src, dst=dst, weight=weight, category=cat, owner=owner, origin=origin,
        rank=g.rank[np.maximum(edge_node, 0)].astype(np.int32), binding=binding,
        index=index_edges(n_points, src, dst, present=weight >= 0, first=is_binding),
        contradicted=int(contradicted),
    )
