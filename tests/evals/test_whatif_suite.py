"""The what-if suite on a real synthetic job (a 40 ms data-loader stall on rank 1 in step 2): each edit
predicted by every predictor and scored against the job simulated again with it."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.types import Case, EditTruth, Expect
from bottleneck_oracle.evals.whatif_suite import run_whatif
from bottleneck_oracle.synth import SynthConfig, load_synth_manifest, synthesize
from bottleneck_oracle.synth.whatif import apply_edits
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.truth.injection import parse_injection
from bottleneck_oracle.whatif.predict import baseline_ms

STEP = 2
STALL = "dataloader_stall@2:1=40ms"
EDITS = ("fix dataloader_stall", "scale op=gemm x2")


def resimulated_ms(folder: Path, edit: str, step: int) -> float:
    """The step's wall time of the job in ``folder`` simulated again with ``edit`` (as whatif/verify.py does)."""
    config, tuning = apply_edits(load_synth_manifest(folder).config, [parse_edit(edit)])
    with tempfile.TemporaryDirectory() as tmp:
        synthesize(Path(tmp), config, workers=1, tuning=tuning)
        return baseline_ms(analyze(read_trace(Path(tmp))), step)


@pytest.fixture(scope="module")
def stalled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    folder = tmp_path_factory.mktemp("whatif_suite") / "stall"
    synthesize(folder, SynthConfig(model="gpt2-small", dp=2, steps=4, injections=(parse_injection(STALL),)),
               workers=1)
    return folder, {e: resimulated_ms(folder, e, STEP) for e in EDITS}


def _case(folder: Path, truth: dict[str, float]) -> Case:
    edits = tuple(EditTruth(e, STEP, ms, tolerance_pct=5.0) for e, ms in truth.items())
    return Case("stall", folder, ("Why is step 2 slow?",),
                Expect("dataloader_stall", STEP, (1,), ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",),
                       edits), kind="synth")


def test_run_whatif_fix_of_injected_stall_within_5pct(stalled: tuple[Path, dict[str, float]],
                                                      tmp_path: Path) -> None:
    folder, truth = stalled
    result = run_whatif([_case(folder, truth), Case("no_edits", folder, (), Expect("none", STEP))],
                        Settings(home=tmp_path, workers=2))
    fix, scale = result.cases
    assert fix.case == "stall: fix dataloader_stall" and scale.case == "stall: scale op=gemm x2"
    # the stall's 40 ms gone: the prediction is the re-simulated truth, within 5%
    assert truth["fix dataloader_stall"] < 0.6 * fix.details["baseline_ms"]
    assert fix.passed and abs(fix.details["error_pct"]) <= 5.0, fix.details
    assert fix.details["predicted"] == fix.details["predicted_ms"][fix.details["chosen"]]
    assert fix.details["true_ms"] == truth["fix dataloader_stall"]
    m = result.metrics
    assert m["n"] == 2 and m["skipped"] == 0
    assert set(m["mape_by_edit_type"]) == {"fix", "fix:dataloader_stall", "kernel_faster:gemm"}
    assert m["mape_by_edit_type"]["fix:dataloader_stall"]["chosen"] == pytest.approx(abs(fix.details["error_pct"]),
                                                                                     abs=1e-2)
    assert {"replay", "chosen"} <= set(m["mape_by_predictor"])
    assert m["mape"] == m["mape_by_predictor"]["chosen"]
    assert m["mape"] == pytest.approx((abs(fix.details["error_pct"]) + abs(scale.details["error_pct"])) / 2, abs=1e-2)
    assert m["within_tolerance"] == (fix.passed + scale.passed) / 2
    for row in (fix, scale):  # every prediction carries its interval; the coverage counts the truths inside
        lo, hi = row.details["interval_ms"]
        assert lo <= row.details["predicted"] <= hi
        assert row.details["in_interval"] == (lo <= row.details["true_ms"] <= hi)
    assert m["interval_coverage"] == (fix.details["in_interval"] + scale.details["in_interval"]) / 2


def test_run_whatif_wrong_truth_fails_and_unsupported_edit_is_skipped(stalled: tuple[Path, dict[str, float]],
                                                                      tmp_path: Path) -> None:
    folder, truth = stalled
    wrong = _case(folder, {"fix dataloader_stall": truth["fix dataloader_stall"] * 2})  # a truth twice too slow
    pause = EditTruth("fix host_pause", STEP, 20.0)  # no pause in the trace: nothing to fix
    unsupported = Case("pause", folder, (), Expect("host_pause", STEP, edits=(pause,)))
    result = run_whatif([wrong, unsupported], Settings(home=tmp_path, workers=2), model=False)
    fix, pause = result.cases
    assert not fix.passed and fix.details["error_pct"] == pytest.approx(-50, abs=3)
    assert set(fix.details["predicted_ms"]) == {"replay"} and fix.details["chosen"] == "replay"
    assert not pause.passed and "host_pause" in pause.details["reason"] and pause.details["error_pct"] is None
    m = result.metrics
    assert (m["n"], m["skipped"], m["within_tolerance"]) == (1, 1, 0.0)
    assert fix.details["in_interval"] is False and m["interval_coverage"] == 0.0  # a truth twice too slow lies out
    assert m["mape_by_edit_type"]["fix:host_pause"] == {"n": 0, "skipped": 1}
    assert math.isfinite(m["mape"]) and m["mape"] == pytest.approx(50, abs=3)


def test_run_whatif_without_edits_is_empty(tmp_path: Path) -> None:
    result = run_whatif([], Settings(home=tmp_path, workers=2))
    assert result.suite == "whatif" and result.cases == ()
    assert result.metrics["mape"] is None and result.metrics["within_tolerance"] is None
    assert result.metrics["interval_coverage"] is None


def test_the_public_gpu_pairs_are_scored_with_their_intervals(tmp_path: Path) -> None:
    """``oracle eval --cases tests/data/resnet50_loader_workers --suite whatif``: each case's true time is what
    the calibration's real pair measured (the re-run's median steady step), and all four land in their interval."""
    from bottleneck_oracle.evals.cases import load_cases
    from bottleneck_oracle.whatif.accuracy import pair_folders, real_pairs
    from tests.conftest import DATA

    root = DATA / "resnet50_loader_workers"
    cases = load_cases(root)
    measured = {p.step: p.measured_ms for p in real_pairs(pair_folders(root), root=root)}
    assert {c.expect.edits[0].step: c.expect.edits[0].true_ms for c in cases} == pytest.approx(measured, abs=1e-3)
    result = run_whatif(cases, Settings(home=tmp_path, workers=1), model=False)
    assert result.metrics["n"] == 4 and result.metrics["interval_coverage"] == 1.0
    assert result.metrics["within_tolerance"] == 1.0
