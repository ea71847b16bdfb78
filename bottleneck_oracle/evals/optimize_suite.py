"""The optimize suite: is the remedy of the case's bottleneck ranked first, and is the time its plan
entry predicts the time the job re-run with it took (``EditTruth.true_ms`` of the ``fix CATEGORY`` edit).

A clean case (category ``none``) has no remedy to find: it passes when no candidate claims to save
more than ``CLEAN_GAIN`` of the step, and is counted in ``clean_false_gains`` when one does (the
kernel-side remedies of a GPU-bound step, faster kernels asked about, claim no fault and do not count).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.types import Case, CaseResult, EditTruth, SuiteResult
from bottleneck_oracle.truth.edits import EditKind, parse_edit
from bottleneck_oracle.vocabulary import Bottleneck
from bottleneck_oracle.whatif.optimize import Candidate, Plan
from bottleneck_oracle.workspace.whatif import optimize_trace

__all__ = ["CLEAN_GAIN", "SUITE", "run_optimize"]

SUITE = "optimize"
CLEAN_GAIN = 0.05  # of the step: a larger gain claimed on a clean trace is a false one
Progress = Callable[[int, int], None]  # (cases done, cases)


def _fix_truth(case: Case, category: str) -> EditTruth | None:
    """The case's ``fix CATEGORY`` truth on its step, if it has one."""
    for truth in case.expect.edits:
        edit = parse_edit(truth.edit)
        if edit.kind == EditKind.FIX and edit.category == category and truth.step == case.expect.step:
            return truth
    return None


def _candidate_json(c: Candidate) -> dict[str, Any]:
    p = c.prediction
    return {"edit": str(c.edit), "category": c.category, "also": list(c.also),
            "predicted_ms": p.best_ms if p else None, "gain_ms": p.gain_ms if p else None}


def _clean_row(case: Case, plan: Plan) -> CaseResult:
    limit = CLEAN_GAIN * plan.baseline_ms
    # a kernel-side remedy of a GPU-bound step is a faster kernel asked about, not a fault claimed
    claims = [_candidate_json(c) for c in plan.candidates
              if c.prediction is not None and c.gain_ms > limit and not c.kernel_side]
    return CaseResult(case.id, not claims, {"clean": True, "step": plan.step, "baseline_ms": plan.baseline_ms,
                                            "limit_ms": round(limit, 3), "false_gains": claims})


def _verified(plan: Plan, truth: EditTruth) -> dict[str, Any]:
    """The first plan entry's predicted time and gain against the truth's."""
    first = plan.plan[0]
    assert first.prediction is not None  # a plan entry is always predicted
    predicted = first.prediction.best_ms
    true_gain = plan.baseline_ms - truth.true_ms
    predicted_gain = plan.baseline_ms - predicted
    error = 100.0 * (predicted - truth.true_ms) / truth.true_ms
    gain_error = 100.0 * abs(predicted_gain - true_gain) / abs(true_gain) if abs(true_gain) > 1e-9 else None
    return {"truth_edit": truth.edit, "predicted_ms": predicted, "true_ms": truth.true_ms,
            "error_pct": round(error, 3), "tolerance_pct": truth.tolerance_pct,
            "within_tolerance": abs(error) <= truth.tolerance_pct, "predicted_gain_ms": round(predicted_gain, 3),
            "true_gain_ms": round(true_gain, 3), "gain_error_pct": None if gain_error is None else round(gain_error, 3)}


def _faulty_row(case: Case, plan: Plan) -> CaseResult:
    expected = case.expect.category
    first = plan.candidates[0] if plan.candidates else None
    details: dict[str, Any] = {"expected": expected, "step": plan.step, "baseline_ms": plan.baseline_ms,
                               "first": _candidate_json(first) if first else None,
                               "first_is_match": first is not None and first.category == expected}
    if not details["first_is_match"]:
        details["why"] = (f"first candidate addresses {first.category}, not {expected}" if first
                          else "no candidate")
    entry = plan.plan[0] if plan.plan else None
    truth = (_fix_truth(case, entry.category) if entry else None) or _fix_truth(case, expected)
    if truth is not None:
        if entry is None:
            details |= {"truth_edit": truth.edit, "true_ms": truth.true_ms, "within_tolerance": False,
                        "why": details.get("why", "the plan is empty")}
        else:
            details |= _verified(plan, truth)
    passed = details["first_is_match"] and details.get("within_tolerance", True)
    return CaseResult(case.id, bool(passed), details)


def _share(rows: list[CaseResult], key: str) -> float | None:
    values = [bool(r.details[key]) for r in rows if key in r.details]
    return round(sum(values) / len(values), 4) if values else None


def run_optimize(cases: list[Case], settings: Settings, *, llm: str = "offline", base_url: str | None = None,
                 progress: Progress | None = None, model: bool = True) -> SuiteResult:
    """Each case's slow step optimized with a budget of one change, the plan scored against the truth
    (once per trace and step: cases that share them share the plan).

    Args:
        model: predict with the graph model beside the replay (``oracle optimize``'s default); off:
            the replay alone, seconds instead of minutes on a CPU.

    ``llm`` and ``base_url`` are unused: the optimizer needs no chat model.

    Returns:
        ``SuiteResult("optimize", metrics, rows)`` with metrics ``{"first_is_match": share of faulty
        cases whose first candidate addresses the expected category, "within_tolerance": share of
        those with a ``fix CATEGORY`` truth whose first plan entry predicts its true time within
        tolerance, "gain_error_pct": mean |predicted - true gain| in % of the true gain, "n": faulty
        cases, "n_verified": cases with a fix truth, "clean_cases": clean cases, "clean_false_gains":
        clean cases where a candidate claims more than 5% of the step}`` (shares and means None when
        nothing was counted); one row per case.
    """
    rows: list[CaseResult] = []
    plans: dict[tuple[str, int | None], Plan] = {}
    for i, case in enumerate(cases):
        clean = case.expect.category == Bottleneck.NONE
        key = (str(case.trace), case.expect.step)
        try:
            if key not in plans:
                plans[key] = optimize_trace(key[0], settings, step=key[1], budget=1, model=model)
            plan = plans[key]
        except ConfigError as e:  # a step the trace lacks: the case fails, the suite goes on
            details: dict[str, Any] = {"clean": True} if clean else {"expected": case.expect.category,
                                                                      "first_is_match": False}
            rows.append(CaseResult(case.id, False, {**details, "error": str(e)}))
        else:
            rows.append(_clean_row(case, plan) if clean else _faulty_row(case, plan))
        if progress:
            progress(i + 1, len(cases))
    faulty = [r for r in rows if not r.details.get("clean")]
    clean_rows = [r for r in rows if r.details.get("clean")]
    gains = [r.details["gain_error_pct"] for r in faulty if r.details.get("gain_error_pct") is not None]
    metrics = {
        "first_is_match": _share(faulty, "first_is_match"),
        "within_tolerance": _share(faulty, "within_tolerance"),
        "gain_error_pct": round(float(np.mean(gains)), 3) if gains else None,
        "n": len(faulty),
        "n_verified": sum(1 for r in faulty if "within_tolerance" in r.details),
        "clean_cases": len(clean_rows),
        "clean_false_gains": sum(1 for r in clean_rows if r.details.get("false_gains")),
    }
    return SuiteResult(SUITE, metrics, tuple(rows))
