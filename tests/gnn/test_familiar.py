"""Whether a step is like the graph model's training steps: simulated jobs are, real traces are not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.gnn.baselines import aggregates, edit_columns
from bottleneck_oracle.gnn.data import step_graphs
from bottleneck_oracle.gnn.familiar import TrainingSteps
from bottleneck_oracle.gnn.predict import Predictor
from bottleneck_oracle.traces import read_trace
from tests.conftest import REPO, WILD
from tests.whatif.cases import GPT2, job


@pytest.fixture(scope="module")
def steps() -> TrainingSteps:
    return Predictor().training_steps


def _distances(steps: TrainingSteps, folder: Path) -> list[float]:
    return [steps.familiarity(sg).distance for sg in step_graphs(analyze(read_trace([folder])))]


def test_the_threshold_is_ten_times_the_rows_own_nearest_distance_at_p99() -> None:
    rows = Predictor().checkpoint.baseline_rows[0][:60]
    x = rows[:, ~edit_columns(rows.shape[1])]
    z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 1e-6, x.std(axis=0), 1.0)
    nearest = [np.sort(np.linalg.norm(z - z[i], axis=1))[1] for i in range(len(z))]  # [0] is the row itself
    assert TrainingSteps(rows).threshold == pytest.approx(10 * np.percentile(nearest, 99), rel=1e-6)


def test_what_was_edited_does_not_make_a_step_unfamiliar(steps: TrainingSteps) -> None:
    _, a = job("", GPT2)
    sg = step_graphs(a)[1]
    assert not edit_columns(len(aggregates(sg)))[:3].any()  # the world size and the step's length count
    assert steps.familiarity(sg).known


@pytest.mark.parametrize("folder", [REPO / "examples" / "gpt_2rank",
                                    WILD / "tracelens" / "h100" / "qwen1.5_0.5b_chat",
                                    WILD / "tracelens" / "h100" / "bert_small"], ids=lambda p: p.name)
def test_real_traces_lie_beyond_the_threshold(steps: TrainingSteps, folder: Path) -> None:
    assert min(_distances(steps, folder)) > steps.threshold
