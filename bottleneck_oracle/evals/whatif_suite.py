"""The what-if suite: each case's edits predicted by every predictor on its trace, against the step time
the job re-simulated (or re-captured) with the edit measured (``EditTruth.true_ms``).

Scoring is ``whatif/accuracy.py``'s: a prediction is a ``Score`` and ``mape_table`` gives the mean
absolute error per edit type and predictor (``chosen``: the predictor each prediction picked). An edit
the trace cannot support (a fix of a fault no detector found) is counted as ``skipped``, not scored.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.types import Case, CaseResult, EditTruth, SuiteResult
from bottleneck_oracle.truth.edits import edit_type, parse_edit
from bottleneck_oracle.whatif.accuracy import Score, mape_table
from bottleneck_oracle.workspace.whatif import whatif_trace

__all__ = ["SUITE", "run_whatif", "score_edit"]

SUITE = "whatif"
Progress = Callable[[int, int], None]  # (cases done, cases)


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 3)


def score_edit(case: Case, truth: EditTruth, settings: Settings, *, model: bool = True) -> Score:
    """One edit of ``case`` predicted on its trace, as a ``Score`` against ``truth`` (``skipped`` says
    why nothing was predicted: the edit does not apply to the trace)."""
    edit = parse_edit(truth.edit)
    try:
        p = whatif_trace(str(case.trace), [edit], settings, step=truth.step, model=model)
    except ConfigError as e:
        return Score(case.id, truth.edit, edit_type(edit), truth.step, float("nan"), truth.true_ms, {}, "", str(e))
    interval = (p.interval.lo_ms, p.interval.hi_ms) if p.interval else None
    return Score(case.id, truth.edit, edit_type(edit), truth.step, p.baseline_ms, truth.true_ms,
                 dict(p.predicted_ms), p.chosen, interval_ms=interval)


def _row(score: Score, truth: EditTruth) -> CaseResult:
    error = score.error_pct(score.chosen) if not score.skipped else float("nan")
    within = not math.isnan(error) and abs(error) <= truth.tolerance_pct
    details = {"edit": score.edit, "edit_type": score.edit_type, "step": score.step,
               "baseline_ms": _rounded(score.baseline_ms), "predicted_ms": dict(score.predicted_ms),
               "chosen": score.chosen or None, "predicted": score.predicted_ms.get(score.chosen),
               "true_ms": truth.true_ms, "error_pct": _rounded(error), "tolerance_pct": truth.tolerance_pct,
               "within_tolerance": within, "interval_ms": list(score.interval_ms) if score.interval_ms else None,
               "in_interval": score.covered}
    if score.skipped:
        details["reason"] = score.skipped
    return CaseResult(f"{score.job}: {score.edit}", within, details)


def _by_predictor(scores: list[Score]) -> dict[str, float]:
    """Predictor -> mean absolute error (%) over every edit it predicted (``chosen`` included)."""
    errors: dict[str, list[float]] = defaultdict(list)
    for s in scores:
        if s.skipped:
            continue
        for name in (*s.predicted_ms, "chosen"):
            errors[name].append(abs(s.error_pct(s.chosen if name == "chosen" else name)))
    return {name: round(float(np.mean(v)), 3) for name, v in sorted(errors.items())}


def run_whatif(cases: list[Case], settings: Settings, *, llm: str = "offline", base_url: str | None = None,
               progress: Progress | None = None, model: bool = True) -> SuiteResult:
    """Every ``EditTruth`` of ``cases`` predicted and scored (cases without edits are left out).

    Args:
        model: the graph model's predictors beside the replay (``oracle whatif``'s default); off: the
            replay alone.

    ``llm`` and ``base_url`` are unused: the what-if engine needs no chat model.

    Returns:
        ``SuiteResult("whatif", metrics, rows)`` with metrics ``{"mape": chosen predictor's MAPE % (None
        when nothing was predicted), "mape_by_predictor": {predictor: MAPE %}, "mape_by_edit_type":
        {edit type (and "fix" for every fix): {predictor: MAPE %, "n", "skipped"}}, "within_tolerance":
        share of predicted edits whose chosen error is within their tolerance (None when none),
        "interval_coverage": share of predicted edits whose true time lies in their interval, "n":
        edits predicted, "skipped": edits the trace could not support}``; one row per (case, edit) named
        ``"CASE: EDIT"`` with ``edit, edit_type, step, baseline_ms, predicted_ms {predictor: ms}, chosen,
        predicted, true_ms, error_pct, tolerance_pct, within_tolerance, interval_ms, in_interval`` (and
        ``reason`` when skipped).
    """
    with_edits = [c for c in cases if c.expect.edits]
    scores: list[Score] = []
    rows: list[CaseResult] = []
    for i, case in enumerate(with_edits):
        for truth in case.expect.edits:
            score = score_edit(case, truth, settings, model=model)
            scores.append(score)
            rows.append(_row(score, truth))
        if progress:
            progress(i + 1, len(with_edits))
    scored = [r for r in rows if "reason" not in r.details]
    by_predictor = _by_predictor(scores)
    covered = [s.covered for s in scores if not s.skipped and s.covered is not None]
    metrics = {
        "mape": by_predictor.get("chosen"),
        "mape_by_predictor": by_predictor,
        "mape_by_edit_type": mape_table(scores),
        "within_tolerance": round(sum(r.passed for r in scored) / len(scored), 4) if scored else None,
        "interval_coverage": round(sum(covered) / len(covered), 4) if covered else None,
        "n": len(scored),
        "skipped": len(rows) - len(scored),
    }
    return SuiteResult(SUITE, metrics, tuple(rows))
