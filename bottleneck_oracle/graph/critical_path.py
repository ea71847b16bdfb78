"""Critical path of every step on every rank, the attribution of its wall time, and node slack.

A step's critical path is the longest path of the point graph ending at the
step's last point (the end of its ProfilerStep or of the last GPU work it
launched), followed back to the start of the step's window (its ProfilerStep
start, or the completion of the earlier steps when the CPU ran ahead). Because
the point graph is weighed from observed times, the path covers every instant
of the step's wall time once, so its categories sum to the wall time exactly.
The path may run on another rank (reached through a collective whose last
member was late): that rank's work keeps its category (the step is bound by
it), its idle time is communication from this rank's point of view (waiting
for a late rank).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from bottleneck_oracle.graph import _kernels
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.longest_path import latest_finish, longest_path
from bottleneck_oracle.graph.points import PointGraph
from bottleneck_oracle.graph.types import CATEGORIES, Category

__all__ = ["StepReport", "find_critical_paths", "node_slack", "check_replay", "replayed_report", "step_points",
           "window_of", "with_path"]

log = logging.getLogger(__name__)
_COMM = np.int8(CATEGORIES.index(Category.COMMUNICATION))
_IDLE = np.int8(CATEGORIES.index(Category.IDLE))
_NONE = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class StepReport:
    """Where one rank's step went.

    Args:
        step (int): ProfilerStep number (-1: the whole trace).
        rank (int): the rank whose step this is.
        start_ns (int): start of the step's window (``StepTable.start_ns``).
        end_ns (int): end of the step's last CPU or GPU work.
        breakdown_ns (dict[Category, int]): wall time per category; sums to ``wall_ns``.
        path_node (np.ndarray): int64[K] node owning each path segment (-1: none).
        path_category (np.ndarray): int8[K] index into ``CATEGORIES``.
        path_rank (np.ndarray): int32[K] rank each segment ran on.
        path_start_ns (np.ndarray): int64[K].
        path_dur_ns (np.ndarray): int64[K].
        start_point (int): the point where the window opens: the start of its ProfilerStep range,
            or the end of the earlier work whose completion opens it (``StepTable.opened_by``).
        end_point (int): the point where it ends (end of its range or of its last GPU work).
        cpu_start_point (int): the start of its ProfilerStep range (-1: ``start_point``).
        cpu_end_point (int): the end of its ProfilerStep range (-1: ``end_point``).
    """

    step: int
    rank: int
    start_ns: int
    end_ns: int
    breakdown_ns: dict[Category, int]
    path_node: np.ndarray
    path_category: np.ndarray
    path_rank: np.ndarray
    path_start_ns: np.ndarray
    path_dur_ns: np.ndarray
    start_point: int
    end_point: int
    cpu_start_point: int = -1
    cpu_end_point: int = -1

    @property
    def wall_ns(self) -> int:
        """Step wall time: end of its last work minus its start."""
        return self.end_ns - self.start_ns

    def window_points(self, t: np.ndarray) -> tuple[int, int]:
        """The points where the window opens and closes on a timeline of point times ``t`` (a
        replay): the later of the CPU start and the end of the earlier work that opened it, and
        the later of the CPU end and the end of the work that completed it, as observed."""
        return window_of(t, self.start_point, self.end_point, self.cpu_start_point, self.cpu_end_point)

    def path_nodes(self) -> np.ndarray:
        """int64[M]: the nodes whose time the critical path runs through, in path order, each once.
        Idle gaps are left out: their owner is the range open around them (a ProfilerStep), not work."""
        nodes = self.path_node[(self.path_node >= 0) & (self.path_category != _IDLE)]
        _, first = np.unique(nodes, return_index=True)
        return nodes[np.sort(first)]


def check_replay(pg: PointGraph) -> tuple[np.ndarray, np.ndarray]:
    """Longest path over the weighted point graph: ``(dist, pred)``.

    With observed weights every point's distance equals its time since the
    source; points where it does not (a bug or broken input) are logged.
    """
    dist, pred = longest_path(pg.index, pg.weight)
    off = np.flatnonzero(dist != pg.t - pg.t[-1])
    if len(off):
        log.warning("replay of the observed graph misses %d of %d point times", len(off), len(dist))
    return dist, pred


def _merge(node: np.ndarray, cat: np.ndarray, rank: np.ndarray, start: np.ndarray, end: np.ndarray):  # type: ignore[no-untyped-def]
    """Joins consecutive segments with the same node, category and rank."""
    if not len(node):
        return node, cat, rank, start, end - start
    new = np.ones(len(node), dtype=bool)
    new[1:] = (node[1:] != node[:-1]) | (cat[1:] != cat[:-1]) | (rank[1:] != rank[:-1])
    idx = np.flatnonzero(new)
    stop = np.append(idx[1:], len(node)) - 1
    return node[idx], cat[idx], rank[idx], start[idx], end[stop] - start[idx]


def _cpu_start_point(g: ExecGraph, row: int) -> int:
    node = int(g.steps.node[row])
    if node >= 0:
        return 2 * node
    mine = np.flatnonzero(g.step_row == row)  # a whole-trace step starts with the rank's first node
    return 2 * int(mine[np.argmin(g.start_ns[mine])])


def window_of(t: np.ndarray, start_point: int, end_point: int, cpu_start_point: int, cpu_end_point: int
              ) -> tuple[int, int]:
    """``StepReport.window_points`` of a window given by its points (``step_points``) on the timeline ``t``."""
    cpu_start = cpu_start_point if cpu_start_point >= 0 else start_point
    cpu_end = cpu_end_point if cpu_end_point >= 0 else end_point
    start = start_point if t[start_point] >= t[cpu_start] else cpu_start
    return start, end_point if t[end_point] >= t[cpu_end] else cpu_end


def step_points(g: ExecGraph, row: int) -> tuple[int, int, int, int]:
    """The points of the window of row ``row`` of ``g.steps`` (a step with work): ``StepReport``'s
    ``start_point``, ``end_point``, ``cpu_start_point`` and ``cpu_end_point``."""
    steps = g.steps
    cpu_start, opener = _cpu_start_point(g, row), int(steps.opened_by[row])  # opener: where earlier work completed
    return (2 * opener + 1 if opener >= 0 else cpu_start, 2 * int(steps.last_node[row]) + 1, cpu_start,
            2 * int(steps.node[row]) + 1 if steps.node[row] >= 0 else -1)


def _report(g: ExecGraph, pg: PointGraph, pred: np.ndarray, row: int) -> StepReport:
    steps = g.steps
    start_point, end_point, cpu_start, cpu_end = step_points(g, row)
    return _walked(pg, pred, pg.t, StepReport(
        step=int(steps.step[row]), rank=int(steps.rank[row]), start_ns=int(steps.start_ns[row]),
        end_ns=int(pg.t[end_point]), breakdown_ns={}, path_node=_NONE, path_category=_NONE, path_rank=_NONE,
        path_start_ns=_NONE, path_dur_ns=_NONE, start_point=start_point, end_point=end_point,
        cpu_start_point=cpu_start, cpu_end_point=cpu_end,
    ))


def _walked(pg: PointGraph, pred: np.ndarray, t: np.ndarray, r: StepReport) -> StepReport:
    """``r`` with its path, breakdown, start and end taken from the timeline ``t`` and its ``pred``."""
    edges = _kernels.walk_back(pred, pg.src, t, r.end_point, int(r.start_ns))
    return with_path(r, pg.owner[edges], pg.category[edges], pg.rank[edges], t[pg.src[edges]], t[pg.dst[edges]])


def with_path(r: StepReport, owner: np.ndarray, category: np.ndarray, rank: np.ndarray, src_ns: np.ndarray,
              dst_ns: np.ndarray) -> StepReport:
    """``r`` with its critical path and breakdown from the path's edges, in time order: each edge's owner,
    category, rank and the times of its two points (the first is cut at the window's start)."""
    seg_start = np.maximum(src_ns, r.start_ns)
    keep = dst_ns > seg_start
    owner, cat, seg_rank, seg_start, seg_end = owner[keep], category[keep], rank[keep], seg_start[keep], dst_ns[keep]
    # another rank's idle time is waiting for a late rank from this rank's view; its work stays work
    cat = np.where((seg_rank != r.rank) & (cat == _IDLE), _COMM, cat)
    dur = seg_end - seg_start
    totals = np.bincount(cat, weights=dur, minlength=len(CATEGORIES)).astype(np.int64)
    node, cat, prank, pstart, pdur = _merge(owner, cat, seg_rank, seg_start, seg_end)
    return replace(r, breakdown_ns={c: int(v) for c, v in zip(CATEGORIES, totals)}, path_node=node,
                   path_category=cat, path_rank=prank, path_start_ns=pstart, path_dur_ns=pdur)


def replayed_report(pg: PointGraph, r: StepReport, t: np.ndarray, pred: np.ndarray,
                    ends: np.ndarray | None = None) -> StepReport:
    """The critical path and breakdown of step report ``r`` on a replayed timeline: point times ``t``
    and the binding edges ``pred`` of a longest-path pass over edited weights (``replay/engine.py``).
    ``ends``: the end points of the step's GPU work, when the step ends with the last of them to end on
    ``t`` (else with the work that ended it as recorded)."""
    first, last = r.window_points(t)
    if ends is not None and len(ends) and t[ends].max() > t[last]:
        last = int(ends[np.argmax(t[ends])])
    return _walked(pg, pred, t, replace(r, start_ns=int(t[first]), end_ns=int(t[last]), end_point=last))


def find_critical_paths(g: ExecGraph, pg: PointGraph, pred: np.ndarray) -> list[StepReport]:
    """One ``StepReport`` per (step, rank), sorted by step then rank.

    Args:
        pred (np.ndarray): the longest-path predecessor edges from ``check_replay``.
    """
    order = np.lexsort((g.steps.rank, g.steps.step))
    return [_report(g, pg, pred, int(r)) for r in order.tolist() if g.steps.last_node[r] >= 0]


def node_slack(g: ExecGraph, pg: PointGraph, dist: np.ndarray) -> np.ndarray:
    """How long each node could be delayed without delaying the end of its step on any rank.

    Returns:
        int64[N] slack in ns (0 on the critical path).
    """
    steps = g.steps
    step_end: dict[int, int] = {}
    for s, e in zip(steps.step.tolist(), steps.end_ns.tolist()):
        step_end[s] = max(step_end.get(s, e), e)
    t0 = int(pg.t[-1])
    horizon = int(pg.t.max())
    row_deadline = np.array([step_end[s] for s in steps.step.tolist()], dtype=np.int64)
    deadline = np.full(len(pg.t), horizon, dtype=np.int64)
    node_deadline = np.where(g.step_row >= 0, row_deadline[np.maximum(g.step_row, 0)], horizon)
    deadline[0 : 2 * len(g) : 2] = node_deadline
    deadline[1 : 2 * len(g) : 2] = node_deadline
    deadline -= t0
    lf = latest_finish(pg.index, pg.weight, deadline)
    slack = lf - dist
    return np.maximum(np.minimum(slack[0 : 2 * len(g) : 2], slack[1 : 2 * len(g) : 2]), 0)
