"""The optimize suite on real synthetic jobs: a 40 ms host sync on rank 1 in step 2 (its fix must be
ranked first, and its plan entry's time must be the re-simulated truth) and a clean job (no candidate
may claim a gain of more than 5% of the step). The quick tests predict with the replay alone; the slow
one with the graph model too, as ``oracle optimize`` does (about 5 s per candidate on 2 cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.optimize_suite import run_optimize
from bottleneck_oracle.evals.types import Case, EditTruth, Expect
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.truth.injection import parse_injection
from bottleneck_oracle.whatif.verify import rerun_step_ms

STEP = 2
JOB = {"model": "gpt2-small", "dp": 2, "steps": 4}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("optimize_suite")
    synthesize(root / "sync", SynthConfig(**JOB, injections=(parse_injection("host_sync@2:1=40ms"),)), workers=1)
    synthesize(root / "clean", SynthConfig(**JOB, seed=3), workers=1)
    return {"sync": root / "sync", "clean": root / "clean"}


@pytest.mark.parametrize("model", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["replay", "model"])
def test_run_optimize_ranks_the_injected_fix_first_within_tolerance(jobs: dict[str, Path], tmp_path: Path,
                                                                    model: bool) -> None:
    true_ms = rerun_step_ms(jobs["sync"], [parse_edit("fix host_sync")], STEP)  # the job re-simulated without it
    truth = (EditTruth("fix host_sync", STEP, true_ms, tolerance_pct=10.0),)
    right = Case("sync", jobs["sync"], (), Expect("host_sync", STEP, (1,), ("cudaStreamSynchronize",), truth))
    # the same trace said to be a checkpoint stall: the first candidate cannot match it
    wrong = Case("sync_as_checkpoint", jobs["sync"], (), Expect("checkpoint_stall", STEP, (1,)))
    clean = Case("clean", jobs["clean"], (), Expect("none", STEP))
    result = run_optimize([right, wrong, clean], Settings(home=tmp_path, workers=2), model=model)
    rows = {r.case: r for r in result.cases}
    d = rows["sync"].details
    assert rows["sync"].passed, d
    assert d["first"]["category"] == "host_sync" and d["first_is_match"]
    assert d["true_ms"] == true_ms and abs(d["error_pct"]) <= 10.0
    assert d["true_gain_ms"] == pytest.approx(40, rel=0.35)  # the 40 ms of syncs, less what overlaps them
    assert d["gain_error_pct"] == pytest.approx(
        100 * abs(d["predicted_gain_ms"] - d["true_gain_ms"]) / d["true_gain_ms"], abs=0.01)
    assert not rows["sync_as_checkpoint"].passed and "host_sync" in rows["sync_as_checkpoint"].details["why"]
    assert "within_tolerance" not in rows["sync_as_checkpoint"].details  # no fix truth to verify
    assert rows["clean"].passed and rows["clean"].details["false_gains"] == []
    m = result.metrics
    assert (m["n"], m["n_verified"], m["clean_cases"], m["clean_false_gains"]) == (2, 1, 1, 0)
    assert m["first_is_match"] == 0.5 and m["within_tolerance"] == 1.0
    assert m["gain_error_pct"] == d["gain_error_pct"]


def test_run_optimize_claimed_gain_on_a_trace_said_clean_is_false(jobs: dict[str, Path], tmp_path: Path) -> None:
    # the faulty trace presented as clean: its fix claims far more than 5% of the step
    result = run_optimize([Case("sync_as_clean", jobs["sync"], (), Expect("none", STEP))],
                          Settings(home=tmp_path, workers=2), model=False)
    (row,) = result.cases
    assert not row.passed and row.details["false_gains"][0]["category"] == "host_sync"
    assert row.details["false_gains"][0]["gain_ms"] > row.details["limit_ms"]
    assert result.metrics["clean_false_gains"] == 1 and result.metrics["first_is_match"] is None
