"""Edits compiled onto a trace's DAG: which nodes a selector picks, and what each edit does to
the point graph's weights.

Every node edit (``scale``, ``remove``, ``set``) becomes a speed-up of the selected nodes' own
time (a removed node takes what it ran and launched with it). A ``fix`` takes out what its
finding attributes (``whatif/fix.py``). ``data_parallel`` rescales the gradient collectives
(``whatif/structural.py``). ``microbatches`` and ``overlap`` change the schedule itself, not
the weights: ``whatif/predict.py`` handles them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.dag.analysis import Analysis
from bottleneck_oracle.dag.op_classes import COLLECTIVES as OP_COLLECTIVES
from bottleneck_oracle.dag.op_classes import classify_strings, op_class_mask
from bottleneck_oracle.dag.types import NodeKind
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import COLLECTIVES, Edit, EditKind, Selector
from bottleneck_oracle.whatif.fix import apply_fix, removal

__all__ = ["Compiled", "compile_edits", "select_nodes"]

_GPU_KINDS = (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.COMM)
@dataclass(frozen=True, slots=True)
class Compiled:
    """Edits as the replay and the graph model take them.

    Args:
        speedup (np.ndarray): float64[N] how many times faster each node's own time is (inf: removed).
        edge_scale (np.ndarray): float64[E] a multiplier on each point-graph edge (gaps, transfers).
        cut (np.ndarray): bool[E] dependencies that no longer hold (a wait on a removed sync).
        assumptions (tuple[str, ...]): what the compiled edits take for granted, in sentences.
        touched (tuple[int, ...]): nodes or edges each edit touched, in the order of the edits.
    """

    speedup: np.ndarray
    edge_scale: np.ndarray
    cut: np.ndarray
    assumptions: tuple[str, ...]
    touched: tuple[int, ...]

    @property
    def nodes_only(self) -> bool:
        """Whether the edits only shorten nodes (what the graph model was trained on)."""
        return bool((self.edge_scale == 1.0).all()) and not self.cut.any()


def select_nodes(a: Analysis, select: Selector) -> np.ndarray:
    """bool[N]: the nodes ``select`` picks.

    An op class picks GPU work where the class has any (a kernel, not the CPU op that launched
    it), else CPU ops; a collective kind picks the communication nodes of its instances.
    """
    g = a.graph
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


def compile_edits(a: Analysis, edits: list[Edit], step: int) -> Compiled:
    """The speed-ups and edge multipliers of ``edits``, for a question about ``step``.

    Raises:
        ConfigError: a selector that picks nothing, a fix with no finding of its category in the
            step, or an edit that is not a change of weights (``microbatches``, ``overlap``).
    """
    g, pg = a.graph, a.points
    speedup = np.ones(len(g))
    edge_scale = np.ones(len(pg.weight))
    cut = np.zeros(len(pg.weight), dtype=bool)
    assumptions: list[str] = []
    touched = []
    for edit in edits:
        if edit.kind in (EditKind.SCALE, EditKind.REMOVE, EditKind.SET):
            mask = select_nodes(a, edit.select)
            if not mask.any():
                raise ConfigError(f"edit {edit}: the selector picks no node of this trace")
            if edit.kind == EditKind.SCALE:
                speedup[mask] *= edit.factor
            elif edit.kind == EditKind.REMOVE:
                mask, waits, callers = removal(a, mask)  # what they ran and launched goes with them
                speedup[mask] = np.inf
                cut |= waits
                edge_scale[callers] = 0.0
            else:
                # each node now takes edit.ms; a longer time is a slow-down (speed-up < 1)
                speedup[mask] *= g.dur_ns[mask] / max(edit.ms * 1e6, 1.0)
            touched.append(int(mask.sum()))
        elif edit.kind == EditKind.FIX:
            hit, text = apply_fix(a, edit, step, edge_scale, speedup, cut)
            touched.append(hit)
            assumptions.append(text)
        elif edit.kind == EditKind.DATA_PARALLEL:
            from bottleneck_oracle.whatif.structural import data_parallel

            rescaled = data_parallel(a, edit.value, keep_global_batch=edit.global_batch_kept)
            edge_scale *= rescaled.weight_scale
            touched.append(int((rescaled.weight_scale != 1.0).sum()))
            assumptions.extend(rescaled.assumptions)
        else:
            raise ConfigError(f"edit {edit}: not a change of the graph's weights")
    return Compiled(speedup, edge_scale, cut, tuple(assumptions), tuple(touched))
