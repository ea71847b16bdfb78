"""Step time and node criticality of a trace's steps, as observed or under what-if edits.

The shipped checkpoint (``bottleneck_oracle/gnn/checkpoint``) is used unless
another is given, so the demo and the agent work without training first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.gnn.data import StepGraph, step_graphs
from bottleneck_oracle.gnn.edits import edit_features
from bottleneck_oracle.gnn.familiar import Familiarity, TrainingSteps
from bottleneck_oracle.gnn.hetero import model_inputs
from bottleneck_oracle.gnn.model import interference_ms
from bottleneck_oracle.gnn.shipped import SHIPPED_CHECKPOINT
from bottleneck_oracle.gnn.train import Checkpoint, load_checkpoint
from bottleneck_oracle.gnn.walk import global_scores, walk
from bottleneck_oracle.replay.engine import Edit, node_speedups
from bottleneck_oracle.replay.interference import interference_levers

__all__ = ["SHIPPED_CHECKPOINT", "StepPrediction", "Predictor"]


@dataclass(frozen=True, slots=True)
class StepPrediction:
    """What the model says about one step.

    Args:
        step (int): ProfilerStep number.
        step_ms (float): predicted wall time of the step (its slowest rank).
        node (np.ndarray): int64[n] ExecGraph node ids.
        on_path (np.ndarray): float32[n] on-path score: at least 0.5 where the walk back from the step's
            end passes, below elsewhere; the node head's probability orders nodes within each side.
        share (np.ndarray): float32[n] predicted share of the wall time (0 off the walk).
        latency_ms (float): CPU time the prediction took.
        interference_ms (float): what the model adds to a replay of the same edited step for the
            interference the edit changes (``replay/interference.py``; 0 without levers).
        replay_ms (float): the replay's wall time for the step (NaN when not replayed).
        familiar (Familiarity | None): how near the unedited step lies to the training steps
            (``gnn/familiar.py``; None: the checkpoint keeps no training steps to compare with).
    """

    step: int
    step_ms: float
    node: np.ndarray
    on_path: np.ndarray
    share: np.ndarray
    latency_ms: float
    interference_ms: float = 0.0
    replay_ms: float = float("nan")
    familiar: Familiarity | None = None

    @property
    def corrected_ms(self) -> float:
        """The replay's wall time corrected by the model (for the interference the replay cannot know)."""
        return self.replay_ms + self.interference_ms


class Predictor:
    """A loaded checkpoint that predicts on StepGraphs or whole analyses."""

    def __init__(self, checkpoint: Path | Checkpoint | None = None) -> None:
        if not isinstance(checkpoint, Checkpoint):
            checkpoint = load_checkpoint(SHIPPED_CHECKPOINT if checkpoint is None else Path(checkpoint))
        self.checkpoint = checkpoint
        self.model = checkpoint.model.eval()
        rows = checkpoint.baseline_rows
        self.training_steps = TrainingSteps(rows[0]) if rows is not None and len(rows[0]) else None

    def preferred(self, question: str) -> str:
        """The predictor the checkpoint's recorded test scores favour for ``question`` (``step_time``,
        ``whatif:kernel_faster:gemm``...): ``gnn`` when nothing was recorded or asked before."""
        preferred = self.checkpoint.metrics.get("preferred", {})
        return str(preferred.get(question, "gnn")) if isinstance(preferred, dict) else "gnn"

    def predict_graph(self, sg: StepGraph, lever_ms: np.ndarray | None = None) -> StepPrediction:
        """Predicts one (possibly edited) step graph; ``lever_ms`` (per node, from the replay of the
        edit) gives the interference correction."""
        started = time.process_time()
        x, edges, data = model_inputs(sg)
        with torch.no_grad():
            out = self.model(x, edges)
            visited = walk(global_scores(out, data, len(sg)))
        on_path = np.zeros(len(sg), dtype=np.float32)
        share = np.zeros(len(sg), dtype=np.float32)
        for t, logits in out.on_path_logit.items():
            idx = data[t].index.numpy()
            on_path[idx] = torch.sigmoid(logits).numpy()
            share[idx] = out.share[t].numpy()
        on_path = (0.5 * visited + 0.5 * on_path).astype(np.float32)
        share[~visited] = 0.0  # a node off the path accounts for none of the wall time
        latency = (time.process_time() - started) * 1e3
        return StepPrediction(sg.step, math.exp(float(out.log_step_ms)), sg.node, on_path, share, latency,
                              float(interference_ms(out, data, lever_ms)))

    def predict(self, a: Analysis, edits: Sequence[Edit] = (), steps: tuple[int, ...] = (), *,
                speedup: np.ndarray | None = None, weight: np.ndarray | None = None) -> list[StepPrediction]:
        """Every complete step of ``a`` (or only ``steps``), with ``edits`` applied to the features and
        replayed, so that both the model's own answer and its corrected replay are there.

        Args:
            speedup: float64[N] node speed-ups instead of ``edits`` (``replay.engine.node_speedups``).
            weight: the edited point-graph weights to replay (``replay.engine.weights_with``), for edits
                of more than nodes (a fix of a gap, a data-parallel degree); the model sees ``speedup``.
        """
        graphs = step_graphs(a, bidirectional=self.model.config.bidirectional, steps=steps)
        speedup = node_speedups(a, list(edits)) if speedup is None else speedup
        edited = bool(edits) or speedup is not None and bool((speedup != 1.0).any()) or weight is not None
        groups = [(speedup == value, float(value)) for value in np.unique(speedup[speedup != 1.0])]
        replayed = interference_levers(a, list(edits), speedup, weight)
        out = []
        for sg in graphs:
            if steps and sg.step not in steps:
                continue
            familiar = self.training_steps.familiarity(sg) if self.training_steps is not None else None
            for mask, value in groups:
                if mask[sg.node].any():
                    sg = edit_features(sg, mask[sg.node], value)
            levers = replayed.lever_ns[sg.node] / 1e6 if edited else None
            out.append(replace(self.predict_graph(sg, levers), replay_ms=replayed.step_ms.get(sg.step, float("nan")),
                               familiar=familiar))
        return out
