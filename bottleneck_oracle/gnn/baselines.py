"""What the model must beat: a formula, aggregate regressors and (in corpus.py) replay of the edited DAG.

- ``compute_sum``: the slowest rank's summed kernel time, the "1F1B formula" of
  the research notebooks this project grows out of (no overlap, no waiting).
- ``mlp`` and ``gbt``: a multi-layer perceptron and gradient-boosted trees on
  per-step aggregates of the same features the model sees, fitted on the same
  training graphs (the aggregates are stored in the checkpoint, so every
  evaluation refits them identically instead of unpickling models).
- ``duration``: criticality ranked by a node's own duration.
- ``replay_kappa``: replay plus one interference constant for every kernel of every job
  (``fit_kappa`` on the training what-ifs), where the model predicts one per kernel.
"""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.gnn.data import FEATURES, NODE_TYPES, StepGraph, node_ranks
from bottleneck_oracle.graph.op_classes import OP_CLASSES

__all__ = ["compute_sum_ms", "aggregates", "AggregateRegressors", "duration_score", "edit_columns", "fit_kappa"]

_C = {name: i for i, name in enumerate(FEATURES)}
_KERNEL = NODE_TYPES.index("kernel")
_MS = 100.0


def compute_sum_ms(sg: StepGraph) -> float:
    """The slowest rank's total kernel time in ms."""
    dur = sg.x[:, _C["dur_ms"]].astype(np.float64) * _MS
    kernels = sg.ntype == _KERNEL
    per_rank = np.bincount(node_ranks(sg.x)[kernels], weights=dur[kernels])
    return float(per_rank.max()) if len(per_rank) else 0.0


def fit_kappa(lever_ms: np.ndarray, missed_ms: np.ndarray) -> float:
    """The one kappa that best explains, in least squares, what replay missed (truth - replay) through
    each what-if's summed levers (``replay/interference.py``); 0 without levers."""
    norm = float(lever_ms @ lever_ms)
    return float(lever_ms @ missed_ms / norm) if norm > 0 else 0.0


def duration_score(sg: StepGraph) -> np.ndarray:
    """A criticality score per node: its own duration."""
    return sg.x[:, _C["dur_ms"]]


def aggregates(sg: StepGraph) -> np.ndarray:
    """float64[F]: per node type and per op class, counts and per-rank time; ends; what was edited."""
    x = sg.x.astype(np.float64)
    world = 2 ** x[0, _C["log2_world"]] if len(x) else 1.0
    dur, end = x[:, _C["dur_ms"]] * _MS, x[:, _C["end_ms"]] * _MS
    edited = x[:, _C["edited"]] > 0
    out = [np.log2(world), np.log1p(end.max() if len(end) else 0.0), np.log1p(compute_sum_ms(sg))]
    for t in range(len(NODE_TYPES)):
        m = sg.ntype == t
        out += [np.log1p(m.sum()), np.log1p(dur[m].sum() / world), np.log1p(end[m].max() if m.any() else 0.0),
                np.log1p(dur[m & edited].sum() / world)]
    for c, _ in OP_CLASSES:
        m = x[:, _C[f"class_{c}"]] > 0
        out += [np.log1p(dur[m].sum() / world), np.log1p(dur[m & edited].sum() / world)]
    out += [edited.mean(), x[edited, _C["edit_log_speedup"]].mean() if edited.any() else 0.0]
    return np.asarray(out, dtype=np.float64)


def edit_columns(width: int) -> np.ndarray:
    """bool[width]: the columns of ``aggregates`` that say what was edited (the rest say what the step is)."""
    edited = np.zeros(width, dtype=bool)
    types = len(NODE_TYPES)
    edited[[3 + 4 * t + 3 for t in range(types)]] = True  # each node type's edited time
    edited[[3 + 4 * types + 2 * c + 1 for c in range(len(OP_CLASSES))]] = True  # each op class's edited time
    edited[-2:] = True  # the share of nodes edited, their mean speed-up
    return edited


class AggregateRegressors:
    """An MLP and gradient-boosted trees fitted on (aggregates, log step ms)."""

    def __init__(self, features: np.ndarray, log_step_ms: np.ndarray, seed: int = 0) -> None:
        from sklearn.ensemble import HistGradientBoostingRegressor
        from sklearn.neural_network import MLPRegressor
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        self.mlp = make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(64, 64), max_iter=2000,
                                                                 early_stopping=True, random_state=seed))
        self.gbt = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=seed)
        self.mlp.fit(features, log_step_ms)
        self.gbt.fit(features, log_step_ms)

    def predict(self, sg: StepGraph) -> dict[str, float]:
        """Step ms by each regressor."""
        row = aggregates(sg)[None, :]
        return {"mlp": float(np.exp(self.mlp.predict(row)[0])), "gbt": float(np.exp(self.gbt.predict(row)[0]))}
