"""A what-if replay of a job one rank at a time: each rank's edited point graph reduced to its boundary, the
reduced graphs joined through the collectives.

The replay of the job (``replay/engine.py``) is a longest path over the job's point graph with edited weights.
Its edges are every rank's own but two kinds, as in ``job/job_paths.py``: into a collective instance's
arrival point from its members' starts on every rank, and into a receive's waiter from a send on another
rank. So a rank's task builds its point graph as the job's graph has it (``job_paths.rank_points``), edits
its weights, and keeps only the longest paths between its boundary points (``_kernels.boundary_paths``):
its instances' arrival points, its source, the ends of its sends to other ranks, its steps' window points,
and the points where other ranks' waits land. A path between two boundary points runs through no other,
so the reduced graph is small only if boundary points cut every long stretch: each lane is also cut where
every ``CUT_EVERY``-th of the rank's instances arrived (``_lane_cuts``). The driver joins the reduced graphs
at the instances' arrival points and the sends (``replay_job``), and one longest path over them gives
every step's wall time on every rank under the edits: the job's replay's to the nanosecond.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph import _kernels
from bottleneck_oracle.graph.critical_path import step_points, window_of
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.job_collectives import JobCollectives
from bottleneck_oracle.graph.longest_path import index_edges, longest_path
from bottleneck_oracle.replay.node_edits import NODE_EDITS, apply_node_edit, picks_nothing
from bottleneck_oracle.graph.points import SOURCE, PointGraph
from bottleneck_oracle.replay.engine import edited_weights, weights_with
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import Edit

__all__ = ["CUT_EVERY", "RankReplay", "ScanWhatIf", "check_node_edits", "rank_replay", "replay_job", "scan_whatif"]

CUT_EVERY = 4  # a cut of the lanes every 4 instances: on the 7b jobs, 8 or 16 gave fewer points but more edges
_NO = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class RankReplay:
    """One rank's edited point graph reduced to its boundary points, numbered: first its reliable instances'
    arrival points (``instance``: each one's job-wide instance), then its source, then the rest.

    Args:
        rank (int): the rank.
        instance (np.ndarray): int64, the job-wide instance of each arrival point.
        points (int): its boundary points.
        source_ns (int): its source's time on its own clock: an edge from the source of weight w puts a point at
            ``source_ns + w``.
        src, dst, weight (np.ndarray): int64, the reduced edges: the longest path between two boundary points.
        send_node (np.ndarray): int64, its sends to other ranks (nodes of its graph); ``send_point``: the
            boundary point of each one's end; ``send_speedup``: how many times faster each one's own time is.
        via_instance, via_dst, via_weight, via_scale, via_cut, via_rank, via_node: the waits here on a send of
            another rank matched to a reliable instance: from its arrival point to a boundary point, as the rank's
            point graph weighs it before the sender's speed-up (``via_rank``, ``via_node``), its multiplier and
            whether it was cut.
        wait_rank, wait_node, wait_dst, wait_weight: the waits here on the end of another rank's send (matched to
            no reliable instance), with their edited weights.
        window (np.ndarray): int64[W, 4] per step with work: the boundary points of its window (``step_points``;
            -1: none); ``window_step``: its step number.
        touched (tuple[int, ...]): the nodes each edit picked on this rank.
    """

    rank: int
    instance: np.ndarray
    points: int
    source_ns: int
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    send_node: np.ndarray
    send_point: np.ndarray
    send_speedup: np.ndarray
    via_instance: np.ndarray
    via_dst: np.ndarray
    via_weight: np.ndarray
    via_scale: np.ndarray
    via_cut: np.ndarray
    via_rank: np.ndarray
    via_node: np.ndarray
    wait_rank: np.ndarray
    wait_node: np.ndarray
    wait_dst: np.ndarray
    wait_weight: np.ndarray
    window: np.ndarray
    window_step: np.ndarray
    touched: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ScanWhatIf:
    """A scan's replay of node edits.

    Args:
        edits (tuple[Edit, ...]): what changed.
        after_ns (dict[tuple[int, int], int]): (step, rank) → the step's wall time on the rank under the edits.
        touched (tuple[int, ...]): the nodes each edit picked, over every rank.
    """

    edits: tuple[Edit, ...]
    after_ns: dict[tuple[int, int], int]
    touched: tuple[int, ...]


def check_node_edits(edits: Sequence[Edit]) -> None:
    """Raises ``ConfigError`` for an edit a scan cannot replay: one that reads the job's whole graph."""
    for e in edits:
        if e.kind not in NODE_EDITS:
            raise ConfigError(f"edit {e}: a scan replays node edits only ({', '.join(NODE_EDITS)}); {e.kind} reads the "
                              "job's whole graph: oracle whatif")


def scan_whatif(edits: Sequence[Edit], replays: Sequence[RankReplay], shift_ns: dict[int, int], instances: int
                ) -> ScanWhatIf:
    """The replay of ``edits`` from every rank's reduced graph.

    Raises:
        ConfigError: an edit whose selector picks no node on any rank."""
    touched = tuple(int(sum(t)) for t in zip(*(r.touched for r in replays)))
    for e, n in zip(edits, touched):
        if not n:
            raise picks_nothing(e)
    return ScanWhatIf(tuple(edits), replay_job(replays, shift_ns, instances), touched)


def rank_replay(g: ExecGraph, pg: PointGraph, job: JobCollectives, heard: np.ndarray, edits: Sequence[Edit]
                ) -> RankReplay:
    """The graph ``g`` of one rank and its point graph ``pg`` (``rank_points``, which says which of ``job.sends``
    its receives ``heard``), edited by ``edits`` (node edits only) and reduced to its boundary."""
    n = len(g)
    speedup, scale, cut = np.ones(n), np.ones(len(pg.weight)), np.zeros(len(pg.weight), dtype=bool)
    touched = tuple(apply_node_edit(g, pg, e, speedup, scale, cut) for e in edits)
    weight = weights_with(pg, speedup, scale, cut)
    rel = g.collectives.reliable
    arrivals = 2 * n + np.arange(int(rel.sum()))
    source = len(pg.t) - 1
    virtual = 2 * n + len(arrivals)  # the points from here to the source: the ends of other ranks' sends
    # edges from elsewhere: the source's into the arrival points and the sends' points (they were pinned to
    # their observed times), and the waits on other ranks' sends, which the driver adds itself
    remote = pg.owner <= -2
    via = remote & (pg.src < virtual) & (pg.src >= 2 * n)
    wait = (pg.src >= virtual) & (pg.src < source)
    inside = ~via & ~wait & ~((pg.origin == SOURCE) & (pg.dst >= 2 * n))
    # a member's start into its instance's arrival point: in the job's graph the last member's binds it at no
    # delay and the others' weigh their minimum lag, 0; alone, the rank's own member may bind it, late
    weight[(pg.dst >= 2 * n) & (pg.dst < virtual) & (pg.weight >= 0)] = 0
    steps = g.steps
    rows = np.flatnonzero(steps.last_node >= 0)
    window = np.array([step_points(g, int(r)) for r in rows.tolist()], dtype=np.int64).reshape(-1, 4)
    sends = 2 * job.sent + 1
    cuts = _lane_cuts(g, np.sort(pg.t[arrivals])[CUT_EVERY - 1::CUT_EVERY])
    # boundary points: the arrivals, the source, then the rest in order
    rest = np.setdiff1d(np.concatenate([sends, window[window >= 0], pg.dst[via | wait], cuts]),
                        np.append(arrivals, source))
    points = np.concatenate([arrivals, [source], rest])
    boundary = np.full(len(pg.t), -1, dtype=np.int64)
    boundary[points] = np.arange(len(points))
    index = pg.index
    w = np.where(inside, weight, -1)
    src, dst, d = _kernels.boundary_paths(index.order, index.src, w, index.in_ptr, index.in_order, boundary,
                                          len(points))
    sender = job.sends.rank[heard], job.sends.node[heard]
    remote_k = -2 - pg.owner
    instances = np.unique(job.instance)[rel]
    return RankReplay(
        rank=int(g.trace.ranks[0].rank), instance=instances, points=len(points), source_ns=int(pg.t[source]),
        src=src, dst=dst, weight=d, send_node=job.sent.astype(np.int64), send_point=boundary[sends],
        send_speedup=speedup[job.sent],
        via_instance=instances[pg.src[via] - 2 * n], via_dst=boundary[pg.dst[via]], via_weight=pg.weight[via],
        via_scale=scale[via], via_cut=cut[via], via_rank=sender[0][remote_k[via]], via_node=sender[1][remote_k[via]],
        wait_rank=sender[0][pg.src[wait] - virtual], wait_node=sender[1][pg.src[wait] - virtual],
        wait_dst=boundary[pg.dst[wait]], wait_weight=weight[wait],
        window=np.where(window >= 0, boundary[np.maximum(window, 0)], -1), window_step=steps.step[rows].astype(np.int64),
        touched=touched,
    )


def _lane_cuts(g: ExecGraph, times: np.ndarray) -> np.ndarray:
    """The start points of the first node on each lane at or after each of ``times`` (sorted)."""
    if not len(times) or not len(g):
        return _NO
    order = np.lexsort((g.start_ns, g.lane))
    lane, start = g.lane[order], g.start_ns[order]
    edges = np.flatnonzero(np.diff(lane)) + 1
    out = []
    for a, b in zip(np.append(0, edges).tolist(), np.append(edges, len(lane)).tolist()):
        at = a + np.searchsorted(start[a:b], times)
        out.append(order[np.unique(at[at < b])])
    return 2 * np.concatenate(out).astype(np.int64)


def replay_job(replays: Sequence[RankReplay], shift_ns: dict[int, int], instances: int) -> dict[tuple[int, int], int]:
    """Every step's wall time on every rank, (step, rank) → ns, from the ranks' reduced graphs (``shift_ns``: each
    rank's clock on the job's; ``instances``: the job's instances)."""
    numbered, ends = {}, instances  # each rank's points as the job's: its arrival points are the instances
    for r in replays:
        numbered[r.rank] = np.concatenate([r.instance, ends + np.arange(r.points - len(r.instance))]).astype(np.int64)
        ends += r.points - len(r.instance)
    by_rank = {r.rank: r for r in replays}
    starts = np.array([r.source_ns + shift_ns[r.rank] for r in replays], dtype=np.int64)
    parts = []
    for r, at in zip(replays, (starts - starts.min()).tolist()):
        job = numbered[r.rank]
        parts += [(job[r.src], job[r.dst], r.weight), (r.via_instance, job[r.via_dst], _via_weights(by_rank, r)),
                  (_sender_points(by_rank, numbered, r), job[r.wait_dst], r.wait_weight),
                  (np.array([ends]), job[[len(r.instance)]], np.array([at]))]  # the job's source to the rank's
    src, dst, w = (np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(3))
    t, _ = longest_path(index_edges(ends + 1, src, dst, present=w >= 0), w)
    out = {}
    for r in replays:
        job = np.append(numbered[r.rank], -1)  # [-1]: no such point
        for step, points in zip(r.window_step.tolist(), job[r.window].tolist()):
            first, last = window_of(t, *points)
            out[(step, r.rank)] = int(t[last] - t[first])
    return out


def _sender_points(by_rank: dict[int, RankReplay], numbered: dict[int, np.ndarray], r: RankReplay) -> np.ndarray:
    """The job's points of the ends of the sends ``r``'s waits are on."""
    point = _per_send(by_rank, r.wait_rank, r.wait_node, "send_point")
    return np.array([numbered[k][p] for k, p in zip(r.wait_rank.tolist(), point.tolist())], dtype=np.int64)


def _per_send(by_rank: dict[int, RankReplay], rank: np.ndarray, node: np.ndarray, column: str) -> np.ndarray:
    """The sender's ``column`` (``send_point``, ``send_speedup``) of each of the sends (``rank``, ``node``)."""
    out = np.zeros(len(rank), dtype=np.float64 if column == "send_speedup" else np.int64)
    for k in np.unique(rank).tolist():
        sel = rank == k
        s = by_rank[k]
        out[sel] = getattr(s, column)[np.searchsorted(s.send_node, node[sel])]
    return out


def _via_weights(by_rank: dict[int, RankReplay], r: RankReplay) -> np.ndarray:
    """The weights of ``r``'s waits on sends matched to reliable instances, each a sender's own time, edited with
    the sender's speed-up as the job's graph edits it."""
    factor = _per_send(by_rank, r.via_rank, r.via_node, "send_speedup")
    return edited_weights(r.via_weight, factor, np.ones(len(factor), dtype=bool), r.via_scale, r.via_cut)
