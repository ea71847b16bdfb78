"""What-if edits of a StepGraph as the model sees them: nodes made shorter or removed, and
dependencies moved. Only the edited nodes' features change; the model works out the rest."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bottleneck_oracle.gnn.data import (
    COLUMN,
    NODE_TYPES,
    REMOVED_LOG_SPEEDUP,
    StepGraph,
    time_columns,
)
from bottleneck_oracle.graph.types import EdgeType

__all__ = ["edit_features", "rewire"]


def edit_features(sg: StepGraph, edited: np.ndarray, speedup: float, step_ms: float = float("nan")) -> StepGraph:
    """The graph as the model sees it after an edit: edited nodes ``speedup`` times shorter (inf: removed).

    Args:
        sg: the observed step.
        edited: bool[n] over ``sg``'s nodes.
        speedup: > 0.
        step_ms: the true wall time after the edit when known (training), else NaN.
    """
    x = sg.x.copy()
    start_us = np.expm1(x[:, COLUMN["log_start_us"]].astype(np.float64))
    dur_us = np.expm1(x[:, COLUMN["log_dur_us"]].astype(np.float64))
    removed = np.isinf(speedup)
    before = dur_us[edited]
    dur_us[edited] = 0.0 if removed else before / speedup
    x[edited, COLUMN["log_saved_us"]] = np.log1p(before - dur_us[edited])
    time_columns(x, dur_us, start_us)
    x[edited, COLUMN["edited"]] = 1
    x[edited, COLUMN["edit_log_speedup"]] = REMOVED_LOG_SPEEDUP if removed else np.log(speedup)
    x[edited, COLUMN["removed"]] = float(removed)
    return replace(sg, x=x, step_ms=step_ms, has_labels=False)


def rewire(sg: StepGraph, remove: tuple[tuple[int, int], ...] = (),
           add: tuple[tuple[int, str, int], ...] = ()) -> StepGraph:
    """The graph as the model sees it with dependencies changed: a what-if that moves work (an
    all-reduce onto its own stream, a send no longer waited for) rather than shortening it.

    Args:
        remove: (u, v) node positions: every edge u → v goes, with its reverse.
        add: (u, relation, v): a new edge of ``relation`` (an EdgeType name, lower case), with its
            reverse where the graph has reverse edges.

    Raises:
        ValueError: a position outside the graph or an unknown relation.
    """
    n = len(sg)
    relations = {e.name.lower() for e in EdgeType}
    for u, v in [*remove, *((u, v) for u, _, v in add)]:
        if not (0 <= u < n and 0 <= v < n):
            raise ValueError(f"rewire: node position {u} or {v} is outside the step graph of {n} nodes")
    if unknown := {rel for _, rel, _ in add} - relations:
        raise ValueError(f"rewire: unknown relation {sorted(unknown)}; known: {', '.join(sorted(relations))}")
    forward = np.array([u * n + v for u, v in remove], dtype=np.int64)
    edges = {}
    for key, pair in sg.edges.items():
        # a reverse relation stores each pair the other way round
        code = pair[1] * n + pair[0] if key[1].startswith("rev_") else pair[0] * n + pair[1]
        edges[key] = pair[:, ~np.isin(code, forward)]
    bidirectional = any(rel.startswith("rev_") for _, rel, _ in sg.edges)
    for u, rel, v in add:
        for key, pair in [((NODE_TYPES[sg.ntype[u]], rel, NODE_TYPES[sg.ntype[v]]), (u, v))] + (
                [((NODE_TYPES[sg.ntype[v]], f"rev_{rel}", NODE_TYPES[sg.ntype[u]]), (v, u))] if bidirectional else []):
            edges[key] = np.concatenate([edges.get(key, np.zeros((2, 0), dtype=np.int64)),
                                         np.array(pair, dtype=np.int64).reshape(2, 1)], axis=1)
    return replace(sg, edges={k: v for k, v in edges.items() if v.shape[1]}, has_labels=False)
