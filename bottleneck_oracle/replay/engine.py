"""What-if replay: make some work faster (or remove it) and replay the observed DAG.

The point graph is weighed so that a longest-path pass reproduces the trace:
the edge that released each point carries the observed delay, every other edge
its minimum lag. An edit scales the time of the edited nodes (their own
segments on their lane, and the transfer of collectives they belong to); the
longest path over the new weights then re-decides which dependency binds each
point. This is the plain replay baseline: it knows the DAG, not interference.

Two questions, two replays. ``replay`` edits the whole job and gives every step's
window on the one replayed timeline (what the job would do; ``oracle scan --whatif``).
``replay_steps`` and ``step_weights`` answer "what would step N take": the step's own
work edited, from where it began as recorded. The first can make a step longer when
its start moves earlier than its end (the earlier steps sped up, its end held by work
the edit does not reach); the second cannot: faster work never lengthens it, and it
saves at most the edited work's own time on its critical path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.grouping import positions_by
from bottleneck_oracle.graph.longest_path import longest_path
from bottleneck_oracle.graph.points import LANE, PointGraph
from bottleneck_oracle.graph.types import EdgeType, NodeKind

__all__ = ["CUT", "Edit", "ReplayResult", "edge_steps", "edited_weights", "gpu_end_points", "node_speedups",
           "own_time", "replay", "replay_steps", "scaled_weights", "step_weights", "weights_with"]


CUT = -(1 << 50)  # the weight of a dependency that no longer holds: ~13 days early, and no overflow


@dataclass(frozen=True, slots=True)
class Edit:
    """Make matching nodes ``speedup`` times faster (``speedup`` = inf removes them).

    Args:
        speedup (float): > 0; 2.0 halves their time.
        kinds (tuple[NodeKind, ...]): node kinds to edit (empty: any kind).
        name (str): regular expression their name must match (empty: any).
        collective (str): collective type of comm nodes, e.g. ``allreduce`` (empty: any).
        ranks (tuple[int, ...]): ranks to edit (empty: all).
        steps (tuple[int, ...]): ProfilerStep numbers to edit (empty: all).
    """

    speedup: float
    kinds: tuple[NodeKind, ...] = ()
    name: str = ""
    collective: str = ""
    ranks: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.speedup > 0:
            raise ValueError(f"Edit: speedup must be > 0, got {self.speedup}")

    def select(self, a: Analysis) -> np.ndarray:
        """bool[N]: the nodes this edit touches."""
        g = a.graph
        mask = np.ones(len(g), dtype=bool)
        if self.kinds:
            mask &= np.isin(g.kind, self.kinds)
        if self.ranks:
            mask &= np.isin(g.rank, self.ranks)
        if self.steps:
            mask &= np.isin(g.step, self.steps)
        if self.name:
            pattern = re.compile(self.name)
            hit = np.array([bool(pattern.search(s)) for s in g.trace.strings], dtype=bool)
            mask &= hit[g.name]
        if self.collective:
            kinds = np.array([c == self.collective for c in g.collectives.kind] + [False], dtype=bool)
            mask &= kinds[np.where(g.collective >= 0, g.collective, len(g.collectives))]
        return mask


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Step wall times before and after the edits, one entry per (step, rank) of the analysis."""

    step: np.ndarray  # int32
    rank: np.ndarray  # int32
    before_ns: np.ndarray  # int64
    after_ns: np.ndarray  # int64


def node_speedups(a: Analysis, edits: list[Edit]) -> np.ndarray:
    """float64[N]: how many times faster each node's own time becomes (1: untouched, inf: removed)."""
    speedup = np.ones(len(a.graph))
    for edit in edits:
        speedup[edit.select(a)] *= edit.speedup
    return speedup


def own_time(pg: PointGraph) -> np.ndarray:
    """bool[E]: the point-graph edges that are some node's own time: its segments on its lane, a
    collective's transfer, the wait leaving a gloo collective's arrival point (its lag is the
    transfer), and a wait leaving its GPU work's start (the GPU's clock read ahead of the host's: its
    lag is the work's time, ``graph/points.py``)."""
    sync = pg.origin == EdgeType.SYNC
    from_arrival = sync & (pg.node[pg.src] < 0)
    from_start = sync & (pg.src % 2 == 0) & (pg.node[pg.src] >= 0) & (pg.owner == pg.node[pg.src])
    # a stream's wait before work that started late is owned by that work, but is no time of its own
    segment = (pg.origin == LANE) & (pg.dst != 2 * pg.owner)
    return (segment | (pg.origin == EdgeType.COLLECTIVE) | from_arrival | from_start) & (pg.owner >= 0)


def weights_with(pg: PointGraph, speedup: np.ndarray, edge_scale: np.ndarray | None = None,
                 cut: np.ndarray | None = None) -> np.ndarray:
    """int64[E]: the point graph's weights with each node's own segments ``speedup`` times shorter,
    then every edge times ``edge_scale`` (float64[E], for edits of gaps and transfers: a fix, a
    data-parallel degree), and the edges in ``cut`` (bool[E]) no longer binding anything."""
    return edited_weights(pg.weight, speedup[np.maximum(pg.owner, 0)], own_time(pg), edge_scale, cut)


def edited_weights(weight: np.ndarray, factor: np.ndarray, own: np.ndarray, edge_scale: np.ndarray | None = None,
                   cut: np.ndarray | None = None) -> np.ndarray:
    """int64: observed edge weights ``weight`` edited as ``weights_with`` edits them: the ``own`` edges (some
    node's own time) ``factor`` times shorter, every edge times ``edge_scale``, the ``cut`` ones gone."""
    out = weight.astype(np.float64)
    hit = own & (factor != 1.0)
    out[hit] = out[hit] / factor[hit]  # inf → 0: removed
    if edge_scale is not None:
        out = np.where(weight >= 0, out * edge_scale, out)  # -1 marks a contradicted edge: keep it
    rounded = np.rint(out).astype(np.int64)
    if cut is not None:
        rounded[cut & (weight >= 0)] = CUT  # a dependency gone: it can never be the longest
    return rounded


def scaled_weights(a: Analysis, edits: list[Edit]) -> np.ndarray:
    """int64[E]: the point graph's weights with the edited nodes' own time scaled."""
    return weights_with(a.points, node_speedups(a, edits))


def replay(a: Analysis, edits: list[Edit], weight: np.ndarray | None = None) -> ReplayResult:
    """Replays the job with the edits applied (or with the point-graph weights ``weight``, from
    ``weights_with``); returns every step's wall time before and after."""
    pg = a.points
    before, _ = longest_path(pg.index, pg.weight)
    after, _ = longest_path(pg.index, scaled_weights(a, edits) if weight is None else weight)
    return ReplayResult(
        step=np.array([r.step for r in a.steps], dtype=np.int32),
        rank=np.array([r.rank for r in a.steps], dtype=np.int32),
        before_ns=_walls(a, before), after_ns=_walls(a, after),
    )


def _walls(a: Analysis, t: np.ndarray, rows: list[int] | None = None) -> np.ndarray:
    """int64[rows]: the windows of steps ``rows`` (default: every step) on the replayed timeline ``t``."""
    reports = a.steps if rows is None else [a.steps[i] for i in rows]
    points = np.array([r.window_points(t) for r in reports], dtype=np.int64).reshape(-1, 2)
    return t[points[:, 1]] - t[points[:, 0]]


def edge_steps(a: Analysis) -> np.ndarray:
    """int32[E]: the step number each point-graph edge's time belongs to: its owner node's, else the node of
    the point it ends at, else of the point it leaves (-1: none, as a node outside every step)."""
    pg, step = a.points, a.graph.step
    n = len(step)
    node = np.where(pg.owner >= 0, pg.owner, np.where(pg.node[pg.dst] >= 0, pg.node[pg.dst], pg.node[pg.src]))
    return np.where((node >= 0) & (node < n), step[np.clip(node, 0, max(n - 1, 0))], -1).astype(np.int32)


def step_weights(a: Analysis, weight: np.ndarray, step: int, steps_of: np.ndarray | None = None) -> np.ndarray:
    """int64[E]: the edited weights ``weight`` on the edges of ``step``, the recorded ones elsewhere: the step's
    own work edited, everything before it as recorded (``steps_of``: ``edge_steps(a)``, when already known)."""
    mine = (edge_steps(a) if steps_of is None else steps_of) == step
    return np.where(mine, weight, a.points.weight)


def gpu_end_points(a: Analysis) -> dict[tuple[int, int], np.ndarray]:
    """(step, rank) → the end points of the step's GPU work: on a replayed timeline the step ends with the
    later of its CPU range and the last of them (DESIGN: a step completes with its last GPU work)."""
    g = a.graph
    gpu = np.flatnonzero(g.trace.lanes.is_gpu[g.lane] & (g.step_row >= 0))
    return {(int(g.steps.step[row]), int(g.steps.rank[row])): 2 * gpu[at] + 1
            for row, at in positions_by(g.step_row[gpu]).items()}


def replay_steps(a: Analysis, edits: list[Edit], weight: np.ndarray | None = None) -> ReplayResult:
    """Every step's wall time with its own work edited (``step_weights``), one entry per (step, rank) of the
    analysis: each step replayed over the points it can move, from the first edited edge of the step to the
    last end of its work, the rest of the timeline as recorded; a step ends with its CPU range or its last
    GPU work, whichever ends later on the replayed timeline."""
    pg = a.points
    recorded = pg.t - pg.t[-1]
    weight = scaled_weights(a, edits) if weight is None else weight
    steps_of, ends_of = edge_steps(a), gpu_end_points(a)
    changed = weight != pg.weight
    after = np.array([r.wall_ns for r in a.steps], dtype=np.int64)
    for step in sorted({r.step for r in a.steps}):
        rows = [i for i, r in enumerate(a.steps) if r.step == step]
        edited = changed & (steps_of == step)
        if not edited.any():
            continue
        # the points a step can end at: its CPU range's end, the work that ended it as recorded, its GPU work
        ends = [np.append(ends_of.get((step, r.rank), []), [r.end_point, r.cpu_end_point]).astype(np.int64)
                for r in (a.steps[i] for i in rows)]
        ends = [e[e >= 0] for e in ends]
        band = recorded >= recorded[pg.src[edited]].min()
        band &= recorded <= max(recorded[e].max() for e in ends)
        t, _ = longest_path(pg.index, np.where(edited, weight, pg.weight), only=band, dist0=recorded)
        after[rows] = [t[e].max() - t[a.steps[i].window_points(t)[0]] for i, e in zip(rows, ends)]
    return ReplayResult(
        step=np.array([r.step for r in a.steps], dtype=np.int32),
        rank=np.array([r.rank for r in a.steps], dtype=np.int32),
        before_ns=np.array([r.wall_ns for r in a.steps], dtype=np.int64), after_ns=after,
    )

