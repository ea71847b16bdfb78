"""Model predictions in the graph: a step time and a criticality per op, by model name and version.

The graph model (``gnn/``, a lower layer) produces them; this module stores them beside the
measured steps so the agent can set a prediction against what the trace shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graphdb.store import GraphStore
from bottleneck_oracle.graphdb.tables import step_key

__all__ = ["Prediction", "load_prediction"]

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
