"""How much of each step's replayed time would move with compute/communication interference.

A GPU kernel that runs while its GPU moves a collective's data runs slower (they
share SMs and memory bandwidth). Plain replay (``replay/engine.py``) keeps every
kernel's observed time, slowdown included, so when an edit changes what overlaps
it misses the change. If a kernel's time is ``base + kappa * overlap`` (overlap:
time it ran alongside a transfer on its rank), an edit that scales the kernel by
``1/speedup`` and moves the transfers gives it ``kappa * lever`` more time than the
replay does, with::

    lever = overlap on the replayed timeline - overlap observed / speedup

To first order the step then ends ``sum(kappa * lever)`` later over the kernels on
its replayed critical path. This module measures the levers; ``kappa``, which the
trace cannot show directly, comes from the graph model (``gnn``).

A transfer is a collective instance from its last member's arrival to its first
member's end, as the point graph weighs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph import _kernels
from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.intervals import covered, merged
from bottleneck_oracle.graph.longest_path import longest_path
from bottleneck_oracle.graph.points import LANE
from bottleneck_oracle.graph.types import EdgeType, NodeKind
from bottleneck_oracle.replay.engine import Edit, node_speedups, weights_with

__all__ = ["Levers", "transfer_overlap", "interference_levers"]


@dataclass(frozen=True, slots=True)
class Levers:
    """A replay of edits with, per step, its slowest complete rank and the interference levers.

    Args:
        step_ms (dict[int, float]): step -> replayed wall ms of its slowest complete rank.
        lever_ns (np.ndarray): float64[N]: each compute kernel's lever on the replayed critical path of
            its step's slowest rank (0 elsewhere): ``sum(kappa * lever_ns)`` over a step's nodes is what
            the step gains, to first order, from interference the edits change.
    """

    step_ms: dict[int, float]
    lever_ns: np.ndarray


def transfer_overlap(a: Analysis, t: np.ndarray, weight: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """float64[len(nodes)]: ns each node ran alongside a transfer on its rank, on the timeline ``t`` (point
    times) of the point graph weighed by ``weight``."""
    g, pg = a.graph, a.points
    transfer = (pg.origin == EdgeType.COLLECTIVE) & (pg.src >= 2 * len(g))  # arrival point -> member end
    s = t[pg.src[transfer]]
    e = s + np.maximum(weight[transfer], 0)
    rank = pg.rank[transfer]
    lo, hi = t[2 * nodes], t[2 * nodes + 1]
    out = np.zeros(len(nodes))
    for r in np.unique(g.rank[nodes]):
        mine = g.rank[nodes] == r
        out[mine] = covered(*merged(s[rank == r], e[rank == r]), lo[mine], hi[mine])
    return out


def interference_levers(a: Analysis, edits: list[Edit], speedup: np.ndarray | None = None,
                        weight: np.ndarray | None = None) -> Levers:
    """Replays ``edits`` (as ``replay`` does) and measures every compute kernel's lever on the result.

    Args:
        speedup: float64[N] node speed-ups to use instead of ``edits`` (``node_speedups``).
        weight: the edited point-graph weights to replay instead (``weights_with``).
    """
    g, pg = a.graph, a.points
    kernels = np.flatnonzero(g.kind == NodeKind.KERNEL)
    speedup = node_speedups(a, edits) if speedup is None else speedup
    scale = 1.0 / speedup[kernels]
    weight = weights_with(a.points, speedup) if weight is None else weight
    t, pred = longest_path(pg.index, weight)
    lever = np.zeros(len(g))
    lever[kernels] = (transfer_overlap(a, t, weight, kernels)
                      - scale * transfer_overlap(a, pg.t, pg.weight, kernels))
    # a kernel's time is the lane edge from its start to its end point
    own = (pg.origin == LANE) & (pg.owner >= 0) & (pg.src + 1 == pg.dst) & (pg.src % 2 == 0)
    edge_lever = np.zeros(len(weight))
    edge_lever[own] = lever[pg.owner[own]]
    step_ms: dict[int, float] = {}
    slowest = {}
    for r in a.steps:
        first, last = r.window_points(t)
        ms = (t[last] - t[first]) / 1e6
        if (r.step, r.rank) not in a.partial_steps and ms > step_ms.get(r.step, -1.0):
            step_ms[r.step], slowest[r.step] = ms, r
    on_path = np.zeros(len(g))
    for r in slowest.values():
        first, last = r.window_points(t)
        edges = _kernels.walk_back(pred, pg.src, t, last, int(t[first]))
        edges = edges[own[edges]]
        on_path[pg.owner[edges]] = edge_lever[edges]
    return Levers(step_ms, on_path)
