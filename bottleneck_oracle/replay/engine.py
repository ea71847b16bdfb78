"""What-if replay: make some work faster (or remove it) and replay the observed DAG.

The point graph is weighed so that a longest-path pass reproduces the trace:
the edge that released each point carries the observed delay, every other edge
its minimum lag. An edit scales the time of the edited nodes (their own
segments on their lane, and the transfer of collectives they belong to); the
longest path over the new weights then re-decides which dependency binds each
point. This is the plain replay baseline: it knows the DAG, not interference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.longest_path import longest_path
from bottleneck_oracle.graph.points import LANE, PointGraph
from bottleneck_oracle.graph.types import EdgeType, NodeKind

__all__ = ["CUT", "Edit", "ReplayResult", "edited_weights", "node_speedups", "own_time", "replay", "scaled_weights",
           "weights_with"]


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
    collective's transfer, and the wait leaving a gloo collective's arrival point (its lag is the
    transfer)."""
    from_arrival = (pg.origin == EdgeType.SYNC) & (pg.node[pg.src] < 0)
    return ((pg.origin == LANE) | (pg.origin == EdgeType.COLLECTIVE) | from_arrival) & (pg.owner >= 0)


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


def _walls(a: Analysis, t: np.ndarray) -> np.ndarray:
    """int64[steps]: every step's window on the replayed timeline ``t``."""
    points = np.array([r.window_points(t) for r in a.steps], dtype=np.int64).reshape(-1, 2)
    return t[points[:, 1]] - t[points[:, 0]]
