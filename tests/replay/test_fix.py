"""Tests for replay/fix.py: a fix of every injectable category, against the job simulated again
without the fault and measured by the same analysis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import Edit
from bottleneck_oracle.replay.fix import water_level
from bottleneck_oracle.whatif.predict import predict_whatif
from bottleneck_oracle.whatif.verify import rerun_step_ms
from tests.whatif.cases import FAULTS, TINY, fault, job


@pytest.mark.parametrize("category", sorted(FAULTS))
def test_fix_predicts_the_job_run_again_without_its_fault(category: str) -> None:
    folder, a = fault(category)
    prediction = predict_whatif(a, 2, [Edit.fix(category, 2)])
    measured = rerun_step_ms(folder, [Edit.fix(category, 2)], 2)
    # measured on this corpus: 0.00-0.52% off; the fault costs 5-1000% of the clean step
    assert prediction.baseline_ms > 1.3 * measured
    assert abs(prediction.best_ms - measured) <= 0.02 * measured, (prediction.best_ms, measured)
    assert prediction.assumptions and prediction.assumptions[0].startswith(f"fix {category}")


def test_a_fix_needs_its_finding_in_the_step() -> None:
    _, a = fault("host_pause")
    with pytest.raises(ConfigError, match=r"step 3 has no host_pause finding to fix \(its findings: "):
        predict_whatif(a, 3, [Edit.fix("host_pause")])
    with pytest.raises(ConfigError, match="step 2 has no checkpoint_stall finding"):
        predict_whatif(a, 2, [Edit.fix("checkpoint_stall")])


@given(st.lists(st.floats(0, 1e9), min_size=1, max_size=40), st.floats(0, 1))
@example([715827882.7980502] * 3, 5e-324)  # the level rounded a ulp above the largest
def test_water_level_cuts_the_longest_first_by_exactly_the_amount(weights: list[float], share: float) -> None:
    w = np.array(weights)
    amount = share * w.sum()
    level = water_level(w, amount)
    assert np.maximum(w - level, 0).sum() == pytest.approx(amount, rel=1e-6, abs=1e-3)
    assert 0 <= level <= w.max()


@pytest.mark.parametrize("category", ["dataloader_stall", "host_pause"])
def test_a_stall_every_rank_had_is_fixed_on_every_rank(category: str) -> None:
    """150 ms on every rank's step thread in step 2: fixed on the rank the critical path names alone, the
    next rank's stall bound and the fix saved 0.04 ms; fixed on every rank that stalled, the step is the
    job's run again without the stall."""
    folder, a = job(f"{category}@2=150ms", TINY)
    prediction = predict_whatif(a, 2, [Edit.fix(category, 2)])
    measured = rerun_step_ms(folder, [Edit.fix(category, 2)], 2)
    assert prediction.baseline_ms - measured == pytest.approx(150, rel=0.02)
    assert abs(prediction.best_ms - measured) <= 0.01 * measured, (prediction.best_ms, measured)
    assert "off the step threads of rank(s) " in prediction.assumptions[0]
