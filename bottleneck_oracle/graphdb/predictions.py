"""Model predictions in the graph: a step time and a criticality per op, by model name and version.

The graph model (``gnn/``, a lower layer) produces them (``model_predictions``); this module stores
them beside the measured steps so the agent can set a prediction against what the trace shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graphdb.store import GraphStore
from bottleneck_oracle.graphdb.tables import step_key

__all__ = ["Prediction", "load_prediction", "model_predictions", "MODEL_NAME", "stored_predictions"]

MODEL_NAME = "heterogat"

_BATCH = 10_000


@dataclass(frozen=True, slots=True)
class Prediction:
    """One model's prediction for one (step, rank) of a loaded trace.

    Args:
        trace_id (str): the trace.
        step (int): the step.
        rank (int): the rank.
        model (str): the model's name.
        version (str): the model's version.
        step_ms (float): predicted step time.
        op_idx (np.ndarray): int64[K] ExecGraph node indexes rated.
        criticality (np.ndarray): float[K] predicted criticality of each, 0 to 1.
    """

    trace_id: str
    step: int
    rank: int
    model: str
    version: str
    step_ms: float
    op_idx: np.ndarray
    criticality: np.ndarray

    def __post_init__(self) -> None:
        if len(self.op_idx) != len(self.criticality):
            raise ValueError(f"Prediction of {self.model}: {len(self.op_idx)} ops but "
                             f"{len(self.criticality)} criticalities")

    @property
    def key(self) -> str:
        """The key of its Prediction node."""
        return f"{step_key(self.trace_id, self.step, self.rank)}:{self.model}:{self.version}"


def load_prediction(store: GraphStore, p: Prediction) -> int:
    """Stores (or replaces) a prediction; returns how many ops it rated that are loaded.

    Raises:
        GraphStoreError: the store is down.
        KeyError: the (step, rank) is not loaded.
    """
    skey = step_key(p.trace_id, p.step, p.rank)
    begun = store.write("prediction_begin", {
        "trace": p.trace_id, "key": p.key, "step_key": skey, "model": p.model, "version": p.version,
        "step": p.step, "rank": p.rank, "step_ms": float(p.step_ms), "created_at": time.time(),
    })
    if not begun.rows:
        raise KeyError(f"step {p.step} of rank {p.rank} of trace {p.trace_id} is not loaded")
    rated = 0
    ops, crit = np.asarray(p.op_idx).tolist(), np.asarray(p.criticality, dtype=np.float64).tolist()
    for start in range(0, len(ops), _BATCH):
        result = store.write("load_prediction_rates", {
            "trace": p.trace_id, "key": p.key, "op": ops[start:start + _BATCH],
            "criticality": crit[start:start + _BATCH],
        })
        rated += int(result.rows[0]["created"]) if result.rows else 0
    return rated


def stored_predictions(store: GraphStore, trace_id: str, checkpoint: Path | None = None) -> int:
    """How many of the trace's stored predictions are the checkpoint's (the shipped one by default): of its
    version and stored after its weights were written; 0 when any is older (the model was retrained since)."""
    from bottleneck_oracle.gnn.shipped import checkpoint_stamp  # no torch: the stamp is read from files

    version, written = checkpoint_stamp(checkpoint)
    rows = store.read("prediction_state", {"trace": trace_id, "model": MODEL_NAME, "version": version})
    if not version or not rows or rows[0]["oldest"] is None or float(rows[0]["oldest"]) < written:
        return 0
    return int(rows[0]["predictions"])


def model_predictions(a: Analysis, trace_id: str, checkpoint: Path | None = None) -> list[Prediction]:
    """The graph model's view of every complete step of ``a``, one Prediction per (step, rank): the
    step's predicted wall time and the on-path score of that rank's ops (0.5 and above: on the model's walk).

    Args:
        checkpoint: a checkpoint folder; the shipped one by default.
    """
    from bottleneck_oracle.gnn.predict import Predictor  # torch: only when predictions are asked for
    from bottleneck_oracle.gnn.train import CHECKPOINT_VERSION

    out = []
    for p in Predictor(checkpoint).predict(a):
        ranks = a.graph.rank[p.node]
        for rank in np.unique(ranks).tolist():
            mine = ranks == rank
            out.append(Prediction(trace_id, p.step, int(rank), MODEL_NAME, f"v{CHECKPOINT_VERSION}", p.step_ms,
                                  p.node[mine], p.on_path[mine].astype(np.float64)))
    return out
