"""Tests for replay/retime.py: the trace moved to its replay, and analysed again."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.truth.edits import Edit
from bottleneck_oracle.whatif.predict import baseline_ms, predict_whatif
from bottleneck_oracle.replay.retime import edited_analysis, retimed
from tests.whatif.cases import FAULTS, fault


def test_a_trace_moved_to_its_own_replay_is_the_same_trace() -> None:
    _, a = fault("slow_compute")
    again = retimed(a, a.points.weight)
    assert np.array_equal(again.events.start_ns, a.graph.trace.events.start_ns)
    assert np.array_equal(again.events.dur_ns, a.graph.trace.events.dur_ns)


@pytest.mark.parametrize("category", ["host_pause", "slow_compute", "pipeline_bubble", "checkpoint_stall"])
def test_the_edited_job_takes_the_predicted_time_and_loses_its_finding(category: str) -> None:
    _, a = fault(category)
    edits = [Edit.fix(category, 2)]
    b = edited_analysis(a, 2, edits)
    assert baseline_ms(b, 2) == pytest.approx(predict_whatif(a, 2, edits).best_ms, abs=0.01)
    assert not [f for f in b.findings if f.category == category and f.step == 2]
    assert [f for f in a.findings if f.category == category and f.step == 2]
    assert {r.step for r in b.steps} == {r.step for r in a.steps}


def test_every_fault_case_still_analyses_after_its_fix() -> None:
    for category in FAULTS:
        _, a = fault(category)
        b = analyze(retimed(a, a.points.weight))
        assert [r.wall_ns for r in b.steps] == [r.wall_ns for r in a.steps]
