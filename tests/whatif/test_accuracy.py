"""Tests for whatif/accuracy.py: the edits scored on a job, and the table of errors per edit type."""

from __future__ import annotations

import math

import pytest

from bottleneck_oracle.synth import SynthConfig
from bottleneck_oracle.truth.injection import parse_injection
from bottleneck_oracle.whatif.accuracy import Score, job_edits, mape_table, score_job, score_jobs
from tests.whatif.cases import fault


def test_job_edits_are_the_ones_the_job_can_be_given() -> None:
    flat = SynthConfig(model="tiny", steps=4)
    assert [str(e) for e in job_edits(flat)] == ["scale op=gemm x2", "scale op=attention x2"]
    job = SynthConfig(model="tiny", dp=2, pp=2, microbatches=4, steps=4,
                      injections=(parse_injection("pipeline_bubble@3=30"),))
    assert [str(e) for e in job_edits(job)] == [
        "scale op=gemm x2", "scale op=attention x2", "scale op=allreduce x2", "scale op=sendrecv x2",
        "fix pipeline_bubble step=3", "data_parallel=4", "microbatches=8"]


def test_a_job_is_scored_against_its_rerun() -> None:
    folder, a = fault("host_pause")
    config = SynthConfig(model="tiny", dp=4, steps=4, injections=(parse_injection("host_pause@2:1=30"),))
    scores = score_job(folder, a, config)
    by_edit = {s.edit: s for s in scores}
    fix = by_edit["fix host_pause step=2"]
    assert fix.step == 2 and abs(fix.error_pct("replay")) < 1 and fix.baseline_ms > 5 * fix.measured_ms
    assert set(by_edit) == {"scale op=gemm x2", "scale op=attention x2", "scale op=allreduce x2",
                            "fix host_pause step=2", "data_parallel=8"}
    assert all(s.skipped == "" and s.chosen in s.predicted_ms for s in scores)


def test_an_undetected_fault_is_listed_as_skipped() -> None:
    config = SynthConfig(model="tiny", dp=2, steps=4, injections=(parse_injection("exposed_communication@2=1"),))
    (scored,) = [s for s in score_jobs([("tiny-comm", config)]) if s.edit_type.startswith("fix:")]
    assert scored.predicted_ms == {} and "no detector found the fault in step 2" in scored.skipped
    table = mape_table([scored])
    assert table["fix"]["skipped"] == 1 and table["fix"]["n"] == 0


def test_the_table_averages_absolute_errors_per_type_and_predictor() -> None:
    def score(kind: str, predicted: dict[str, float], chosen: str) -> Score:
        return Score("j", kind, kind, 2, 120.0, 100.0, predicted, chosen)

    table = mape_table([score("kernel_faster:gemm", {"replay": 110.0, "gnn": 95.0}, "gnn"),
                        score("kernel_faster:gemm", {"replay": 100.0, "gnn": 80.0}, "replay"),
                        score("fix:host_pause", {"replay": 101.0}, "replay")])
    assert table["kernel_faster:gemm"] == {"replay": 5.0, "gnn": 12.5, "chosen": 2.5, "n": 2, "skipped": 0}
    assert table["fix"]["replay"] == table["fix:host_pause"]["replay"] == pytest.approx(1.0)
    assert math.isnan(score("x", {}, "").error_pct("replay"))
