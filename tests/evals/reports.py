"""Hand-made suite results in the shapes the suites return, for the report and compare tests."""

from __future__ import annotations

from typing import Any

from bottleneck_oracle.evals.types import CaseResult, SuiteResult

ROOTCAUSE = {"top1_accuracy": 0.75, "top3_accuracy": 1.0, "localization": 0.75, "op_recall": 1.0, "precision": 0.75,
             "false_positive_rate": 0.0, "groundedness": 1.0, "n_cases": 4,
             "per_category": {"host_sync": 1.0, "none": 1.0, "straggler_rank": 0.0, "launch_overhead": 1.0}}
BASELINES = {"blind_floor": {"top1_accuracy": 0.0, "top3_accuracy": 0.25, "false_positive_rate": 1.0,
                             "per_category": {"host_sync": 0.0, "none": 0.0}},
             "findings_only": {"top1_accuracy": 0.5, "top3_accuracy": 0.75, "false_positive_rate": 0.0}}


def _rc_row(case: str, expected: str, got: str, wrong: list[str]) -> CaseResult:
    return CaseResult(case, not wrong, {"expected": {"category": expected, "step": 3, "ranks": [1], "ops": ["op"]},
                                        "got": {"category": got, "step": 3, "ranks": [1], "ops": ["op"]},
                                        "wrong": wrong})


def rootcause(**changes: Any) -> SuiteResult:
    """A root-cause result: 4 cases, the straggler one answered as host_sync; ``changes`` override metrics,
    ``failing`` names cases that fail."""
    failing = set(changes.pop("failing", ()))
    rows = [_rc_row("sync", "host_sync", "host_sync", []), _rc_row("clean", "none", "none", []),
            _rc_row("late", "straggler_rank", "host_sync", ["category"]),
            _rc_row("launch", "launch_overhead", "launch_overhead", [])]
    rows = [CaseResult(r.case, r.passed and r.case not in failing, r.details) for r in rows]
    return SuiteResult("rootcause", {**ROOTCAUSE, "baselines": BASELINES, **changes}, tuple(rows))


def whatif(**changes: Any) -> SuiteResult:
    """A what-if result: MAPE per predictor and per edit type and predictor, two edits."""
    metrics = {"mape": 4.0, "mape_by_predictor": {"replay": 4.0, "gnn_replay": 9.0},
               "mape_by_edit_type": {"scale": {"replay": 3.0, "gnn_replay": 8.0, "n": 1},
                                     "fix": {"replay": 5.0, "gnn_replay": 10.0, "n": 1}},
               "within_tolerance": 1.0, "n": 2, "skipped": 0}
    rows = (CaseResult("a: scale op=gemm x2", True, {"edit_type": "scale", "true_ms": 100.0,
                                                     "predicted_ms": {"replay": 103.0, "gnn_replay": 92.0}}),
            CaseResult("a: fix host_sync", True, {"edit_type": "fix", "true_ms": 80.0,
                                                  "predicted_ms": {"replay": 84.0, "gnn_replay": 88.0}}))
    return SuiteResult("whatif", {**metrics, **changes}, rows)


def results(**changes: Any) -> dict[str, SuiteResult]:
    return {"rootcause": rootcause(**changes), "whatif": whatif()}
