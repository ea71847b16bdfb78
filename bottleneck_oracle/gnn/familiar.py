"""Whether a step looks like the steps the graph model was trained on.

A checkpoint keeps each training step's aggregates (``gnn/baselines.py``: per node type and op class, counts
and time; the world size; the step's length). A step is familiar when its aggregates, standardized by the
training steps', lie near some training step: no farther than ten times the distance that covers 99% of the
training steps' own nearest neighbours. Beyond that the model's recorded scores say nothing about it, and its
predictions step out of the choice (``whatif/predict.py``).

Measured on the shipped checkpoint: the synthetic jobs of the tests lie 0.06 to 3.1 from the nearest training
step, every real trace tried 5.9 (a BERT step on an H100) to 60 (a CPU capture); the threshold is 4.9.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.gnn.baselines import aggregates, edit_columns
from bottleneck_oracle.gnn.data import StepGraph

__all__ = ["Familiarity", "TrainingSteps"]

_MARGIN = 10.0  # the threshold, in units of the training steps' own 99th-percentile nearest distance


@dataclass(frozen=True, slots=True)
class Familiarity:
    """How far a step lies from the nearest training step, and how far is still familiar."""

    distance: float
    threshold: float

    @property
    def known(self) -> bool:
        return self.distance <= self.threshold

    def to_json(self) -> dict[str, object]:
        return {"distance": round(self.distance, 2), "threshold": round(self.threshold, 2), "known": self.known}


class TrainingSteps:
    """The training steps' aggregates, standardized, and the distance beyond which a step is unfamiliar."""

    def __init__(self, rows: np.ndarray) -> None:
        self._keep = ~edit_columns(rows.shape[1])  # what a step is, not what was edited in it
        x = rows[:, self._keep].astype(np.float64)
        self._mean = x.mean(axis=0)
        self._scale = np.where(x.std(axis=0) > 1e-6, x.std(axis=0), 1.0)
        self._z = (x - self._mean) / self._scale
        self.threshold = _MARGIN * float(np.percentile(_nearest_other(self._z), 99)) if len(x) > 1 else 0.0

    def familiarity(self, sg: StepGraph) -> Familiarity:
        z = (aggregates(sg)[self._keep] - self._mean) / self._scale
        distance = float(np.sqrt(((self._z - z) ** 2).sum(axis=1)).min())
        return Familiarity(distance, self.threshold)


def _nearest_other(z: np.ndarray) -> np.ndarray:
    """Each row's distance to its nearest other row."""
    squared = (z * z).sum(axis=1)
    d2 = np.maximum(squared[:, None] + squared[None, :] - 2.0 * z @ z.T, 0.0)
    np.fill_diagonal(d2, np.inf)
    return np.sqrt(d2.min(axis=1))
