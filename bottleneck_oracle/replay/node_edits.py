"""Edits of nodes (``scale``, ``remove``, ``set``) as the replay takes them: which nodes a selector picks, what
removing them takes with them, and how many times faster each node's own time becomes.

They read one graph and its point graph only, so they apply to the job's graph (``replay/compile.py``) and to
each rank's graph alone (a scan's what-if, ``replay/rank_replay.py``) alike.
"""

from __future__ import annotations

import re

import numpy as np

from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.op_classes import COLLECTIVES as OP_COLLECTIVES
from bottleneck_oracle.graph.op_classes import classify_strings, op_class_mask
from bottleneck_oracle.graph.points import LANE, PointGraph
from bottleneck_oracle.graph.types import EdgeType, NodeKind
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import COLLECTIVES, Edit, EditKind, Selector

__all__ = ["NODE_EDITS", "apply_node_edit", "picks_nothing", "removal", "select_nodes"]

NODE_EDITS = (EditKind.SCALE, EditKind.REMOVE, EditKind.SET)
_GPU_KINDS = (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.COMM)


def select_nodes(g: ExecGraph, select: Selector) -> np.ndarray:
    """bool[N]: the nodes of ``g`` that ``select`` picks.

    An op class picks GPU work where the class has any (a kernel, not the CPU op that launched
    it), else CPU ops; a collective kind picks the communication nodes of its instances.
    """
    mask = np.ones(len(g), dtype=bool)
    if select.kind:
        mask &= g.kind == NodeKind[select.kind.upper()]
    if select.ranks:
        mask &= np.isin(g.rank, select.ranks)
    if select.steps:
        mask &= np.isin(g.step, select.steps)
    if select.streams:
        mask &= np.isin(g.trace.lanes.stream[g.lane], select.streams)
    if select.name:
        pattern = re.compile(select.name)
        hit = np.fromiter((bool(pattern.search(s)) for s in g.trace.strings), dtype=bool, count=len(g.trace.strings))
        mask &= hit[g.name]
    if select.op in COLLECTIVES:
        picked = lambda k: k == select.op or (select.op == "sendrecv" and k in ("send", "recv"))  # noqa: E731
        kinds = np.array([picked(k) for k in g.collectives.kind] + [False], dtype=bool)
        # a kernel matched to no instance (one rank's trace, DeepEP's all-to-all) by its own name
        _, coll, _ = classify_strings(g.trace.strings)
        named = np.array([picked(k) for k in OP_COLLECTIVES] + [False], dtype=bool)[coll[g.name]] & (g.collective < 0)
        mask &= (g.kind == NodeKind.COMM) & (kinds[np.where(g.collective >= 0, g.collective, len(g.collectives))]
                                             | named)
    elif select.op:
        of_class = op_class_mask(g, select.op)
        on_gpu = of_class & np.isin(g.kind, _GPU_KINDS)
        mask &= on_gpu if on_gpu.any() else of_class
    return mask


def removal(g: ExecGraph, pg: PointGraph, seed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What removing the ``seed`` nodes removes: bool[N] the nodes with what they ran (nested) and the
    GPU work they launched; bool[E] the point-graph edges of the waits that end in them; bool[E] the
    host gaps right before each seed (the Python that called it)."""
    nodes = g.under(seed)  # children of a removed node go too
    src, dst = g.edges_of(EdgeType.LAUNCH)
    nodes[dst[nodes[src]]] = True
    ends = pg.dst < 2 * len(g)
    waits = np.zeros(len(pg.dst), dtype=bool)
    waits[ends] = (pg.origin[ends] == EdgeType.SYNC) & nodes[pg.dst[ends] // 2]
    top = seed & ~nodes[np.maximum(g.parent, 0)] | seed & (g.parent < 0)
    starts = np.zeros(2 * len(g) + 1, dtype=bool)
    starts[2 * np.flatnonzero(top)] = True
    owner = np.maximum(pg.owner, 0)
    gap = (pg.origin == LANE) & ((pg.owner < 0) | np.isin(g.kind[owner], (NodeKind.ANNOTATION, NodeKind.PYTHON)))
    callers = gap & starts[np.minimum(pg.dst, 2 * len(g))]
    return nodes, waits, callers


def apply_node_edit(g: ExecGraph, pg: PointGraph, edit: Edit, speedup: np.ndarray, edge_scale: np.ndarray,
                    cut: np.ndarray) -> int:
    """Applies ``edit`` (one of ``NODE_EDITS``) to the speed-ups of ``g``'s nodes and the multipliers and cuts
    of ``pg``'s edges, in place; returns how many nodes it touched (0: its selector picks none here)."""
    mask = select_nodes(g, edit.select)
    if edit.kind == EditKind.SCALE:
        speedup[mask] *= edit.factor
    elif edit.kind == EditKind.REMOVE:
        mask, waits, callers = removal(g, pg, mask)  # what they ran and launched goes with them
        speedup[mask] = np.inf
        cut |= waits
        edge_scale[callers] = 0.0
    else:
        # each node now takes edit.ms; a longer time is a slow-down (speed-up < 1)
        speedup[mask] *= g.dur_ns[mask] / max(edit.ms * 1e6, 1.0)
    return int(mask.sum())


def picks_nothing(edit: Edit) -> ConfigError:
    """The error of an edit whose selector picks no node of the trace."""
    return ConfigError(f"edit {edit}: the selector picks no node of this trace")
