"""Edits compiled onto a trace's DAG: what each edit does to the point graph's weights.

Every node edit (``scale``, ``remove``, ``set``) becomes a speed-up of the selected nodes' own
time (a removed node takes what it ran and launched with it; ``replay/node_edits.py``). A ``fix`` takes out what its
finding attributes (``replay/fix.py``). ``data_parallel`` rescales the gradient collectives
(``replay/structural.py``). ``microbatches`` and ``overlap`` change the schedule itself, not
the weights: ``whatif/predict.py`` handles them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.replay.node_edits import NODE_EDITS, apply_node_edit, picks_nothing
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import Edit, EditKind
from bottleneck_oracle.replay.fix import apply_fix

__all__ = ["Compiled", "compile_edits"]


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
        if edit.kind in NODE_EDITS:
            picked = apply_node_edit(g, pg, edit, speedup, edge_scale, cut)
            if not picked:
                raise picks_nothing(edit)
            touched.append(picked)
        elif edit.kind == EditKind.FIX:
            hit, text = apply_fix(a, edit, step, edge_scale, speedup, cut)
            touched.append(hit)
            assumptions.append(text)
        elif edit.kind == EditKind.DATA_PARALLEL:
            from bottleneck_oracle.replay.structural import data_parallel

            rescaled = data_parallel(a, edit.value, keep_global_batch=edit.global_batch_kept)
            edge_scale *= rescaled.weight_scale
            touched.append(int((rescaled.weight_scale != 1.0).sum()))
            assumptions.extend(rescaled.assumptions)
        else:
            raise ConfigError(f"edit {edit}: not a change of the graph's weights")
    return Compiled(speedup, edge_scale, cut, tuple(assumptions), tuple(touched))
