"""The critical path of every step of a job, stitched from each rank's chains.

A step's critical path follows binding edges back from its last point (``graph/critical_path.py``). All of
them are edges of one rank but two kinds: into a collective instance's arrival point, from the start of its
last member to arrive, and into a receive that waited, from the end of the send on the other rank. So once a
rank's graph has its instances' times and the ends of the sends it waits for (``points.InstanceTimes``), its
binding edges are the job's, and the rank can keep, alone, the chains its steps' paths and the paths that
jump to it can take: a forest of its points, each with its binding edge, cut where the edge comes from
another rank (``rank_paths``). The reduce walks them (``JobPaths``): down a rank's chain, across to the rank
the edge comes from, down its chain, until the step's start. The path, its ranks and its breakdown are the
job's graph's to the digit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph import _kernels
from bottleneck_oracle.graph.build import resumes
from bottleneck_oracle.graph.critical_path import StepReport, check_replay, with_path
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.job_collectives import JobCollectives
from bottleneck_oracle.graph.points import InstanceTimes, PointGraph, RemoteWaits, build_point_graph

__all__ = ["JobPaths", "PlacedPaths", "RankPaths", "rank_paths", "rank_points"]

_LONG_AGO = np.iinfo(np.int64).min // 4  # the source's time: before any step's start on any clock


@dataclass(frozen=True, slots=True)
class RankPaths:
    """The chains of one rank: the points its steps' critical paths, and the paths that reach it from other
    ranks, can pass through, each with the binding edge that released it. Times on the rank's own clock.

    Args:
        t (np.ndarray): int64[K] each point's time.
        prev (np.ndarray): int64[K] the point its binding edge leaves, as an index here (-1: none: the
            source, or a point whose edge comes from another rank).
        category (np.ndarray): int8[K] the binding edge's category (index into ``CATEGORIES``).
        owner (np.ndarray): int32[K] the node of the rank's graph whose time the edge is (-1: none; -2 - k:
            the k-th of ``remote_owner``).
        remote_owner (np.ndarray): int64[R, 2] (rank, node) of ops on other ranks that own edges here.
        jump_at (np.ndarray): int64[J] the points (indices, in order) whose binding edge comes from another
            rank; ``jump_rank``: that rank; ``jump_point``: the edge's point on it, as a point of its graph
            (2 node: a member's start, 2 node + 1: a send's end).
        source (int): the index of the source point (-1: not on a chain).
        step_end (np.ndarray): int64 per row of the rank's steps: the index of its last point (-1: no work).
        entries (np.ndarray): int64[E] the points where other ranks' paths go on here, as points of its graph
            (in order); ``entry_index``: their indices.
    """

    t: np.ndarray
    prev: np.ndarray
    category: np.ndarray
    owner: np.ndarray
    remote_owner: np.ndarray
    jump_at: np.ndarray
    jump_rank: np.ndarray
    jump_point: np.ndarray
    source: int
    step_end: np.ndarray
    entries: np.ndarray
    entry_index: np.ndarray

    def entry(self, point: int) -> int:
        """The index of ``point`` (a point of the rank's graph), where another rank's path goes on here.

        Raises:
            KeyError: no path of another rank goes on at ``point``."""
        at = _position(self.entries, point)
        if at < 0:
            raise KeyError(point)
        return int(self.entry_index[at])

    def jump(self, index: int) -> tuple[int, int] | None:
        """(rank, point of its graph) where the path through the point ``index`` goes on; None: here."""
        at = _position(self.jump_at, index)
        return None if at < 0 else (int(self.jump_rank[at]), int(self.jump_point[at]))


def _position(ordered: np.ndarray, value: int) -> int:
    """The index of ``value`` in the sorted ``ordered``; -1: not there."""
    at = int(np.searchsorted(ordered, value))
    return at if at < len(ordered) and ordered[at] == value else -1


def rank_points(g: ExecGraph, job: JobCollectives) -> tuple[PointGraph, np.ndarray]:
    """The point graph of the graph ``g`` of one rank, with the job's instance times and the ends of the sends its
    receives waited for (its binding edges are the job's graph's), and which of ``job.sends`` those are."""
    sent = job.sends
    remote = RemoteWaits(job.rows(sent.instance), resumes(g.lane, g.start_ns, g.lane[sent.receive], sent.end_ns),
                         sent.end_ns)
    heard = remote.waiter >= 0  # the sends whose receiving thread resumed after them
    remote = RemoteWaits(remote.row[heard], remote.waiter[heard], remote.end_ns[heard])
    first_end = job.settled_end if job.settled_end is not None else job.first_end
    return build_point_graph(g, InstanceTimes(job.per_row(first_end), job.per_row(job.last_start), remote)), heard


def rank_paths(g: ExecGraph, job: JobCollectives) -> RankPaths:
    """The chains of the graph ``g`` of one rank, built with the job's collectives ``job``."""
    rank = int(g.trace.ranks[0].rank)
    sent = job.sends
    pg, heard = rank_points(g, job)
    _, pred = check_replay(pg)
    # where the path goes on on another rank: arrival points last reached there, ends of sends from there
    n, rel = len(g), g.collectives.reliable
    last_rank, last_node = job.per_row(job.last_rank)[rel], job.per_row(job.last_node)[rel]
    arrival = 2 * n + np.arange(int(rel.sum()))
    elsewhere = last_rank != rank
    jump_at = np.concatenate([arrival[elsewhere], 2 * n + len(arrival) + np.arange(int(heard.sum()))])
    jump_rank = np.concatenate([last_rank[elsewhere], sent.rank[heard]])
    jump_point = np.concatenate([2 * last_node[elsewhere], 2 * sent.node[heard] + 1])
    pred[jump_at] = -1
    # where other ranks' paths go on here: its members that arrived last where others waited, its sends to them
    shared = g.collectives.members[rel] > np.bincount(g.collective[job.nodes], minlength=len(rel))[rel]
    entries = np.unique(np.concatenate([2 * last_node[~elsewhere & shared], 2 * job.sent + 1]))
    ends = g.steps.last_node
    sinks = np.concatenate([2 * ends[ends >= 0] + 1, entries]).astype(np.int64)
    kept = np.flatnonzero(_kernels.mark_back(pred, pg.src, sinks))
    index = np.full(len(pg.t), -1, dtype=np.int64)
    index[kept] = np.arange(len(kept))
    edge = pred[kept]
    has = edge >= 0
    edge = np.maximum(edge, 0)
    on_chain = index[jump_at] >= 0
    order = np.argsort(index[jump_at[on_chain]])
    return RankPaths(
        t=pg.t[kept], prev=np.where(has, index[pg.src[edge]], -1),
        category=np.where(has, pg.category[edge], 0).astype(np.int8),
        owner=np.where(has, pg.owner[edge], -1).astype(np.int32),
        remote_owner=np.stack([sent.rank[heard], sent.node[heard]], axis=1),
        jump_at=index[jump_at[on_chain]][order], jump_rank=jump_rank[on_chain][order],
        jump_point=jump_point[on_chain][order], source=int(index[-1]),
        step_end=np.where(ends >= 0, index[2 * np.maximum(ends, 0) + 1], -1).astype(np.int64),
        entries=entries, entry_index=index[entries],
    )


@dataclass(frozen=True, slots=True)
class PlacedPaths:
    """One rank's chains where the job's graph has them: its nodes numbered after ``base`` (the nodes of the
    lower ranks), its times moved by ``shift_ns`` onto the job's clock."""

    rank: int
    base: int
    shift_ns: int
    paths: RankPaths


class JobPaths:
    """Every rank's chains, joined where their binding edges cross ranks: the critical path of any step."""

    def __init__(self, ranks: Sequence[PlacedPaths]) -> None:
        self._ranks = {p.rank: p for p in ranks}
        self._t = {}
        for p in ranks:
            t = p.paths.t + p.shift_ns
            if p.paths.source >= 0:
                t[p.paths.source] = _LONG_AGO
            self._t[p.rank] = t
        # walk_back follows pred[v] to the edge's src; here a point's edge is named by its previous point
        self._same = np.arange(max((len(p.paths.t) for p in ranks), default=0), dtype=np.int64)

    def report(self, r: StepReport, step_row: int) -> StepReport:
        """``r`` (rank ``r.rank``'s row ``step_row`` of its steps, its window on the job's clock) with its
        critical path and breakdown."""
        parts = []
        rank, sink = r.rank, int(self._ranks[r.rank].paths.step_end[step_row])
        while sink >= 0:
            p, t = self._ranks[rank], self._t[rank]
            points = np.append(_kernels.walk_back(p.paths.prev, self._same, t, sink, r.start_ns), sink)
            parts.append((p, t, points))
            v = int(points[0])
            jump = p.paths.jump(v)
            if t[v] <= r.start_ns or jump is None:
                break
            rank = jump[0]
            sink = self._ranks[rank].paths.entry(jump[1])
        parts.reverse()
        cat = lambda f: np.concatenate([f(p, t, e[1:], e[:-1]) for p, t, e in parts])  # noqa: E731
        return with_path(r, cat(self._owners), cat(lambda p, t, e, s: p.paths.category[e]),
                         cat(lambda p, t, e, s: np.full(len(e), p.rank, np.int32)),
                         cat(lambda p, t, e, s: t[s]), cat(lambda p, t, e, s: t[e]))

    def _owners(self, p: PlacedPaths, t: np.ndarray, edges: np.ndarray, _: np.ndarray) -> np.ndarray:
        """The job graph's node owning each edge: the rank's nodes after ``base``, another rank's op after its."""
        owner = p.paths.owner[edges].astype(np.int64)
        out = np.where(owner >= 0, owner + p.base, -1)
        for k in np.flatnonzero(owner <= -2).tolist():
            other, node = p.paths.remote_owner[-2 - owner[k]].tolist()
            out[k] = self._ranks[other].base + node
        return out
