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


def test_a_chronic_straggler_is_brought_on_time_not_emptied() -> None:
    """Rank 0 of the checkpoint capture reaches the all-reduce late in most steps (a chronic finding). Its fix
    takes off each step's work only what the rank was late by there, as the other ranks waited for it, never
    all its work (which left a step faster than either rank could compute it)."""
    from bottleneck_oracle.analysis import analyze
    from bottleneck_oracle.findings.detectors import late_arrivals, late_ns
    from bottleneck_oracle.graph.collectives import collective_arrivals
    from bottleneck_oracle.traces import read_trace
    from bottleneck_oracle.vocabulary import Bottleneck
    from tests.conftest import DATA

    a = analyze(read_trace(DATA / "gloo_checkpoint_stall"))
    (chronic,) = [f for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK and f.step is None]
    rank = chronic.ranks[0]
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps]
    late = {step: late_ns(hits) / 1e6 for (step, r), hits in late_arrivals(collective_arrivals(a.graph),
                                                                           complete).items() if r == rank}
    assert 3 not in late and {2, 6} <= set(late)  # in step 3 it was late by less than a straggler is
    p = predict_whatif(a, 6, [Edit.fix(Bottleneck.STRAGGLER_RANK, 6)])
    assert "what it was late by there" in p.assumptions[0]
    removed = float(p.assumptions[0].split(": ")[1].split(" ms")[0])
    assert removed <= sum(late.values()) + 1e-3  # at most its lateness, summed over its steps
    walls = {r.rank: r.wall_ns / 1e6 for r in a.steps if r.step == 6}
    # on time in step 6, its work shortened by its lateness there and no more
    assert p.best_ms >= walls[rank] - late[6] - 1e-3
    on_time_3 = predict_whatif(a, 3, [Edit.fix(Bottleneck.STRAGGLER_RANK, 3)])
    assert on_time_3.best_ms == on_time_3.baseline_ms  # nothing to take off where it was not late
