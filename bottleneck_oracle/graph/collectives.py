"""Collectives: one instance matched across ranks, and gloo ops tied to the c10d calls that issued them.

Matching keys, best first (TRACE-NOTES 5.3): the ``Comms Id`` hash; the
process group and its sequence number; else the k-th occurrence per (group,
collective type, element count) on each rank. A gloo send and receive pair by
direction and peer (the c10d call's concrete inputs). An instance is reliable when nobody left before
the last member arrived (min end ≥ max start), the defining property of a
blocking collective; doubtful matches get no cross-rank edge.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.graph import CollectiveTable, ExecGraph
from bottleneck_oracle.graph.names import collective_type, p2p_direction
from bottleneck_oracle.graph.types import NodeKind, Role
from bottleneck_oracle.traces import Trace

__all__ = [
    "ARRIVAL_TOL_NS", "CollectiveArrival", "CollectiveMatch", "CommNodes", "arrivals_of", "collective_arrivals",
    "comm_nodes", "completion_ns", "group_instances", "last_arrival_ns", "match_collectives", "pair_gloo_calls",
]

ARRIVAL_TOL_NS = 50_000  # members whose spans overlap within this are one blocking instance


class CollectiveMatch:
    """Result of matching: instance id per node, the instance table, and COLLECTIVE edges."""

    def __init__(self, instance: np.ndarray, table: CollectiveTable, src: np.ndarray, dst: np.ndarray) -> None:
        self.instance = instance
        self.table = table
        self.src = src
        self.dst = dst


Key = tuple[object, ...]
KeyColumns = tuple[object, ...]  # a tag, then one list or int64 array per field: the keys of many nodes


def _key_candidates(trace: Trace, nodes: np.ndarray, meta_event: np.ndarray, kinds: list[str], rank: np.ndarray,
                    start: np.ndarray, every: bool = False) -> dict[str, KeyColumns]:
    """The keys ``nodes`` can be matched by, best first, as columns: ``comms_id`` and ``seq`` when every node
    has one, ``order`` always; with ``every`` false, only the best."""
    ev = trace.events
    rows = meta_event[nodes]
    comms = ev.comms_id[rows]
    seq = ev.coll_seq[rows]
    pg = [trace.strings[i] for i in ev.pg_name[rows]]
    out: dict[str, KeyColumns] = {}
    if (comms > 0).all():
        out["comms_id"] = ("id", comms.astype(np.int64))
    if (seq >= 0).all() and (every or not out):
        out["seq"] = ("seq", pg, kinds, seq.astype(np.int64))
    if out and not every:
        return out
    nelems = ev.nelems[rows].astype(np.int64)
    counter: dict[tuple[int, str, str, int], int] = defaultdict(int)
    kth = np.zeros(len(nodes), dtype=np.int64)
    for i in np.lexsort((start[nodes], rank[nodes])).tolist():
        slot = (int(rank[nodes[i]]), pg[i], kinds[i], int(nelems[i]))
        kth[i] = counter[slot]
        counter[slot] += 1
    out["order"] = ("order", pg, kinds, nelems, kth)
    return out


def _p2p_keys(trace: Trace, nodes: np.ndarray, name: np.ndarray, rank: np.ndarray, peer: np.ndarray,
              start: np.ndarray) -> np.ndarray:
    """A send from a to b and a receive on b from a are the k-th transfer a → b on both sides: int64[M, 3]
    (a, b, k) per node of ``nodes``."""
    counter: dict[tuple[int, int, str], int] = defaultdict(int)
    keys = np.zeros((len(nodes), 3), dtype=np.int64)
    for i in np.argsort(start[nodes], kind="stable").tolist():
        node = nodes[i]
        direction = p2p_direction(trace.strings[name[node]])
        me, other = int(rank[node]), int(peer[node])
        pair = (me, other) if direction == "send" else (other, me)
        slot = (*pair, direction)
        keys[i] = (*pair, counter[slot])
        counter[slot] += 1
    return keys


@dataclass(frozen=True, slots=True)
class CommNodes:
    """The comm nodes of one class (GPU kernels, or gloo ops) and the keys each can be matched by.

    Args:
        on_gpu (bool): the class.
        nodes (np.ndarray): int64[M] comm nodes, in node order.
        kinds (list[str]): collective type of each.
        keys (dict[str, KeyColumns]): by how (``comms_id``, ``seq``, ``order``, best first), the keys of the
            nodes as columns (``key_list`` makes them keys).
        p2p (np.ndarray): int64[P] the point-to-point ops among them, which keep their own key under every how.
        p2p_keys (np.ndarray): int64[P, 3] their key: the k-th transfer from rank a to rank b.
    """

    on_gpu: bool
    nodes: np.ndarray
    kinds: list[str]
    keys: dict[str, KeyColumns]
    p2p: np.ndarray
    p2p_keys: np.ndarray

    def key_list(self, how: str) -> list[Key]:
        """The key of each node by ``how``."""
        tag, *columns = self.keys[how]
        rows = zip(*(c.tolist() if isinstance(c, np.ndarray) else c for c in columns))
        out: list[Key] = [(tag, *row) for row in rows]
        for i, key in zip(self.p2p.tolist(), self.p2p_keys.tolist()):
            out[i] = ("p2p", *key)
        return out


def comm_nodes(trace: Trace, kind: np.ndarray, rank: np.ndarray, lane_is_gpu: np.ndarray, name: np.ndarray,
               meta_event: np.ndarray, start: np.ndarray, peer: np.ndarray, every: bool = False) -> list[CommNodes]:
    """The comm nodes of each class that has some, GPU first, with their matching keys (``every``: all the
    keys each could be matched by, so that ranks read apart can agree on one; else the best)."""
    out = []
    type_cache: dict[int, str] = {}
    for on_gpu in (True, False):
        nodes = np.flatnonzero((kind == NodeKind.COMM) & (lane_is_gpu == on_gpu))
        if not len(nodes):
            continue
        ctypes = [type_cache.setdefault(int(i), collective_type(trace.strings[i])) for i in name[nodes]]
        p2p = np.flatnonzero(peer[nodes] >= 0)
        out.append(CommNodes(on_gpu, nodes, ctypes, _key_candidates(trace, nodes, meta_event, ctypes, rank, start, every),
                             p2p, _p2p_keys(trace, nodes[p2p], name, rank, peer, start)))
    return out


def group_instances(keys: list[Key], rank: np.ndarray, start: np.ndarray,
                    end: np.ndarray) -> list[tuple[np.ndarray, bool]]:
    """Members with one key on two ranks or more are one instance: ``(positions, reliable)`` per instance, in
    the order of their first member. Reliable: one member per rank, and nobody left before the last arrived."""
    groups: dict[Key, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        groups[key].append(i)
    out = []
    for members in groups.values():
        m = np.array(members)
        ranks = len(np.unique(rank[m]))
        if ranks < 2:
            continue
        out.append((m, bool(ranks == len(m) and end[m].min() + ARRIVAL_TOL_NS >= start[m].max())))
    return out


def match_collectives(
    trace: Trace, kind: np.ndarray, rank: np.ndarray, lane_is_gpu: np.ndarray, name: np.ndarray,
    meta_event: np.ndarray, start: np.ndarray, end: np.ndarray, peer: np.ndarray,
) -> CollectiveMatch:
    """Groups the comm nodes of all ranks into collective instances.

    GPU comm kernels and gloo ops are matched separately (a job uses one or the other);
    gloo sends and receives pair by direction and peer.

    Args:
        meta_event: int64[N], the event row whose args describe each comm node
            (the node itself, or the ``record_param_comms`` that launched it).
        peer: int[N], the other rank of a point-to-point op (-1 for others).
    """
    instance = np.full(len(kind), -1, dtype=np.int32)
    kinds_out: list[str] = []
    keys_out: list[str] = []
    members_out: list[int] = []
    reliable_out: list[bool] = []
    src, dst = [], []
    for cls in comm_nodes(trace, kind, rank, lane_is_gpu, name, meta_event, start, peer):
        how = next(iter(cls.keys))
        nodes = cls.nodes
        for pos, ok in group_instances(cls.key_list(how), rank[nodes], start[nodes], end[nodes]):
            m = nodes[pos]
            instance[m] = len(kinds_out)
            kinds_out.append(cls.kinds[int(pos[0])])
            keys_out.append(how)
            members_out.append(len(m))
            reliable_out.append(ok)
            if ok:
                last = m[np.argmax(start[m])]
                others = m[m != last]
                src.append(np.full(len(others), last))
                dst.append(others)
    table = CollectiveTable(
        kind=tuple(kinds_out), key=tuple(keys_out),
        members=np.array(members_out, dtype=np.int32), reliable=np.array(reliable_out, dtype=bool),
    )
    cat = (lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64))
    return CollectiveMatch(instance, table, cat(src), cat(dst))


def _op_type(name: str) -> str:
    return p2p_direction(name) or collective_type(name)


def pair_gloo_calls(
    trace: Trace, kind: np.ndarray, role: np.ndarray, rank: np.ndarray, lane_is_gpu: np.ndarray,
    name: np.ndarray, event: np.ndarray, start: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Each gloo op on a gloo thread ↔ the c10d op that issued it on the same rank.

    Same collective type, same element count, k-th with k-th in start order.

    Returns:
        ``(c10d_node, gloo_node)`` pairs.
    """
    nelems = trace.events.nelems[event]
    calls = np.flatnonzero(role == Role.COLLECTIVE_CALL)
    gloo = np.flatnonzero((kind == NodeKind.COMM) & ~lane_is_gpu)
    queues: dict[tuple[int, str, int], list[int]] = defaultdict(list)
    for c in calls[np.argsort(start[calls], kind="stable")].tolist():
        queues[(int(rank[c]), _op_type(trace.strings[name[c]]), int(nelems[c]))].append(c)
    pairs_c, pairs_g = [], []
    taken: dict[tuple[int, str, int], int] = defaultdict(int)
    for g in gloo[np.argsort(start[gloo], kind="stable")].tolist():
        slot = (int(rank[g]), _op_type(trace.strings[name[g]]), int(nelems[g]))
        queue = queues.get(slot, [])
        k = taken[slot]
        if k < len(queue) and start[queue[k]] <= start[g]:
            pairs_c.append(queue[k])
            pairs_g.append(g)
            taken[slot] += 1
    return np.array(pairs_c, dtype=np.int64), np.array(pairs_g, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class CollectiveArrival:
    """Who reached one collective instance last, and how long the others waited for it.

    Args:
        instance (int): row of ``ExecGraph.collectives``.
        kind (str): collective type.
        step (int): ProfilerStep of the last arrival.
        members (tuple[int, ...]): member nodes, in rank order.
        ranks (tuple[int, ...]): their ranks.
        last_rank (int): the rank that arrived last.
        last_node (int): its member node.
        lateness_ns (int): its arrival minus the median arrival of the others.
        relayed_ns (int): how much longer than in its other steps the last rank had itself waited for
            other ranks in the step before arriving, inside collectives and transfers: lateness passed
            on, not made (``own_ns``).
        arrived_ns (int): when the last rank arrived.
        starts (tuple[int, ...]): when each member started (arrived), as ``members``.
    """

    instance: int
    kind: str
    step: int
    members: tuple[int, ...]
    ranks: tuple[int, ...]
    last_rank: int
    last_node: int
    lateness_ns: int
    relayed_ns: int = 0
    arrived_ns: int = 0
    starts: tuple[int, ...] = ()

    @property
    def own_ns(self) -> int:
        """The lateness the last rank made itself: what it brought beyond the waits it passed on."""
        return max(self.lateness_ns - self.relayed_ns, 0)


def collective_arrivals(g: ExecGraph) -> list[CollectiveArrival]:
    """One record per reliable collective instance, in instance order, each with the waits its last
    rank had passed on (``relayed_ns``)."""
    members = np.flatnonzero(g.collective >= 0)
    members = members[g.collectives.reliable[g.collective[members]]]
    return arrivals_of(members, g.collective[members], g.start_ns[members], g.rank[members], g.step[members],
                       g.collectives.kind)


def arrivals_of(members: np.ndarray, inst: np.ndarray, start: np.ndarray, rank: np.ndarray, step: np.ndarray,
                kinds: tuple[str, ...]) -> list[CollectiveArrival]:
    """``collective_arrivals`` from the columns of the members of reliable instances (node, instance, start,
    rank, step), wherever they were read: one graph, or each rank's summary."""
    if not len(members):
        return []
    # by arrival within each instance; on a tie the lowest rank is the last
    by_arrival = np.lexsort((-rank, start, inst))
    first, end = _groups(inst[by_arrival])
    n = end - first
    if np.any(n < 2):  # one member: nobody waited
        keep = np.repeat(n >= 2, n)
        members, inst, start, rank, step = (a[by_arrival][keep] for a in (members, inst, start, rank, step))
        by_arrival = np.lexsort((-rank, start, inst))
        first, end = _groups(inst[by_arrival])
        n = end - first
    arrived = start[by_arrival]
    last = by_arrival[end - 1]
    arrive = arrived[end - 1]
    # the median arrival of the others: the middle of the group's earlier arrivals (np.median's float mean)
    median = (arrived[first + (n - 2) // 2].astype(np.float64) + arrived[first + (n - 1) // 2]) / 2
    lateness = (arrive.astype(np.float64) - median).astype(np.int64)
    relayed = _waited_more(step, rank, start, arrive[np.searchsorted(np.unique(inst), inst)])[last]
    by_rank = np.lexsort((rank, inst))
    groups = np.split(by_rank, first[1:])
    return [CollectiveArrival(
        instance=int(inst[last[k]]), kind=kinds[int(inst[last[k]])], step=int(step[last[k]]),
        members=tuple(members[grp].tolist()), ranks=tuple(rank[grp].tolist()), last_rank=int(rank[last[k]]),
        last_node=int(members[last[k]]), lateness_ns=int(lateness[k]), relayed_ns=int(relayed[k]),
        arrived_ns=int(arrive[k]), starts=tuple(start[grp].tolist()),
    ) for k, grp in enumerate(groups)]


def _groups(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each run of equal keys starts and ends."""
    cut = np.flatnonzero(np.diff(sorted_keys)) + 1
    return np.r_[0, cut].astype(np.int64), np.r_[cut, len(sorted_keys)].astype(np.int64)


def _waited_more(step: np.ndarray, rank: np.ndarray, start: np.ndarray, ended: np.ndarray) -> np.ndarray:
    """Per member, how much longer its rank had waited inside collectives and transfers (from its
    arrival to the instance's last arrival, ``ended``) in its step up to it, than by the same collective
    of its other steps: the waits it passes on, its usual ones (a pipeline's receives) left out."""
    n = len(start)
    who = np.unique(np.stack([step, rank]), axis=1, return_inverse=True)[1].ravel()
    order = np.lexsort((start, who))
    w, s, e = who[order], start[order], ended[order]
    first, end = _groups(w)
    at = np.repeat(first, end - first)  # where each member's (step, rank) begins
    # the union of the wait intervals so far: each adds what lies beyond the ends before it
    reach = _running_max(e, w)
    before = np.where(np.arange(n) > at, reach[np.maximum(np.arange(n) - 1, 0)], s)
    total = np.cumsum(np.maximum(e - np.maximum(s, before), 0))
    waited = total - np.r_[0, total][at]
    # against the median of the same rank's other steps at the same collective (k-th of the step)
    typical = _median_of_others(waited, np.unique(np.stack([rank[order], np.arange(n) - at]), axis=1,
                                                   return_inverse=True)[1].ravel())
    out = np.empty(n, dtype=np.int64)
    out[order] = np.maximum(waited - typical, 0)
    return out


def _running_max(values: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """The largest of ``values`` so far within each run of ``segment`` (sorted)."""
    distinct, dense = np.unique(values, return_inverse=True)
    offset = segment.astype(np.int64) * np.int64(len(distinct) + 1)  # each run above the one before
    return distinct[np.maximum.accumulate(dense.ravel() + offset) - offset]


def _median_of_others(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per value, the median of the other values of its group (0 alone), as ``np.median`` of them gives
    it, truncated to ns."""
    order = np.lexsort((values, group))
    v = values[order].astype(np.float64)
    first, end = _groups(group[order])
    size = np.repeat(end - first, end - first)
    at = np.repeat(first, end - first)
    mine = np.arange(len(v)) - at  # its place in its group, by value
    lo, hi = (size - 2) // 2, (size - 1) // 2  # the middle of the others, skipping its own place
    pick = lambda k: v[np.minimum(at + k + (k >= mine), len(v) - 1)]  # noqa: E731
    median = np.where(size > 1, (pick(lo) + pick(hi)) / 2, 0.0)
    out = np.empty(len(v), dtype=np.int64)
    out[order] = median.astype(np.int64)
    return out


def _per_member(instance: np.ndarray, reliable: np.ndarray, value: np.ndarray, latest: bool,
                other: np.ndarray) -> np.ndarray:
    """For members of a reliable collective, the latest (or earliest) ``value`` over their instance's
    members; ``other`` for every other node."""
    member = np.flatnonzero((instance >= 0) & (reliable[np.maximum(instance, 0)] if len(reliable) else False))
    info = np.iinfo(np.int64)
    per = np.full(len(reliable), info.min if latest else info.max, dtype=np.int64)
    (np.maximum if latest else np.minimum).at(per, instance[member], value[member])
    out = other.copy()
    out[member] = per[instance[member]]
    return out


def completion_ns(instance: np.ndarray, reliable: np.ndarray, end: np.ndarray) -> np.ndarray:
    """When each node's work completed: for members of a reliable collective, the end of the
    first member to finish (the data was there then); for every other node, its own end."""
    return _per_member(instance, reliable, end, latest=False, other=end)


def last_arrival_ns(instance: np.ndarray, reliable: np.ndarray, start: np.ndarray) -> np.ndarray:
    """When each node's collective could start moving data: for members of a reliable collective, the
    start of the last member to arrive; for every other node, never (int64 max)."""
    return _per_member(instance, reliable, start, latest=True,
                       other=np.full(len(start), np.iinfo(np.int64).max, dtype=np.int64))
