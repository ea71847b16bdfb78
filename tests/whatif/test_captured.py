"""What-if on real CPU captures (two gloo ranks training a small GPT): the matching remedy ranked
first for every fault a capture injects, and fixes against the job captured again without its
fault: the closed loop on real time. Marked slow: they time real runs, alone."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.capture.capture import capture
from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
from bottleneck_oracle.dag.analysis import Analysis, analyze
from bottleneck_oracle.graphdb.playbook import read_playbook
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import Edit
from bottleneck_oracle.whatif.optimize import optimize
from bottleneck_oracle.whatif.predict import baseline_ms, predict_whatif
from bottleneck_oracle.whatif.verify import rerun
from tests.captured_noise import injected, retaken

pytestmark = pytest.mark.slow

# steps of about 110 ms on this machine, so a few ms of scheduling noise is a few percent
MODEL = {"layers": 4, "d_model": 128, "heads": 4, "seq_len": 64, "batch_size": 16, "vocab": 512, "timeout_s": 300}
FAULT_STEP = 4
# What a fault costs here, for the check that the run's noise does not hide it. Not here: an injected
# blocking all-reduce (exposed_communication), whose wait on a gloo capture the analysis counts as idle
# host time, so optimize proposes fix host_pause for it (see the README's known limits).
FAULTS = {
    "dataloader_stall@4:0=150ms": None, "straggler_rank@4:1=150ms": None, "host_pause@4:0=150ms": None,
    "checkpoint_stall@4:1=64MB": 100.0, "slow_compute@4:1=4x": 100.0,
}


def _take(folder: Path, inject: str) -> Analysis:
    capture(folder, CaptureConfig(ranks=2, steps=6, injections=(parse_injection(inject),), **MODEL))
    return analyze(read_trace(folder))


@cache
def _captured(inject: str, root: Path) -> Analysis:
    return injected(root / inject.split("@")[0], inject, _take, cost_ms=FAULTS[inject])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("captured")


def _clean_walls(a: Analysis, but: int) -> np.ndarray:
    steps = sorted({r.step for r in a.steps if (r.step, r.rank) not in a.partial_steps} - {but})
    return np.array([baseline_ms(a, s) for s in steps])


@pytest.mark.parametrize("inject", sorted(FAULTS))
def test_optimize_ranks_the_matching_fix_first(root: Path, inject: str) -> None:
    category = inject.split("@")[0]
    plan = optimize(_captured(inject, root), FAULT_STEP, read_playbook(), budget=1)
    best = plan.candidates[0]
    assert category in (best.category, *best.also), [(c.category, c.also, c.gain_ms) for c in plan.candidates]
    assert best.gain_ms > 0.3 * plan.baseline_ms


@pytest.mark.parametrize("inject", ["dataloader_stall@4:0=150ms", "straggler_rank@4:1=150ms", "host_pause@4:0=150ms",
                                    "checkpoint_stall@4:1=64MB"])
def test_a_fix_predicts_the_recaptured_step(root: Path, inject: str) -> None:
    category = inject.split("@")[0]
    a = _captured(inject, root)
    folder = Path(a.graph.trace.ranks[0].path).parent
    predicted = predict_whatif(a, FAULT_STEP, [Edit.fix(category, FAULT_STEP)]).best_ms
    before = _clean_walls(a, FAULT_STEP)
    assert baseline_ms(a, FAULT_STEP) - float(np.median(before)) > 100  # the fault was there

    def matches(again: Analysis) -> None:  # and it is gone
        measured = baseline_ms(again, FAULT_STEP)
        # the noise of this run: how much the re-capture's clean steps spread, and how far the machine's
        # speed drifted between the two captures (the prediction stands on the first one's clean work)
        walls = _clean_walls(again, FAULT_STEP)
        spread = float(np.median(np.abs(walls - np.median(walls)))) / float(np.median(walls))
        drift = abs(float(np.median(before)) - float(np.median(walls))) / float(np.median(walls))
        error = abs(predicted - measured) / measured
        assert error <= 0.10 + 3 * spread + drift, (predicted, measured, spread, drift)

    # one step of a re-capture is one sample of a shared machine: a take that stalled there is taken again
    retaken(lambda _: rerun(folder, [Edit.fix(category, FAULT_STEP)]), matches)
