"""What-if between two runs: which edit, applied to the slower run, predicts the faster one, and how close.

A change users bring (a data loader fixed, a collective made faster) is often one the edit language can
say. The candidates are the fixes of the findings that appeared or grew in the slower run, causes before
symptoms (a rank that arrives late at a collective because of its own stall is a symptom of that stall),
then the collectives that moved, scaled by how much they moved. Each is replayed on the slower run's
steady steps nearest its median; the chosen edit is the first candidate whose predicted median comes
within ``CLOSE_PCT`` of the faster run's, else the closest. This checks the what-if engine on every pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.analysis.diff import RunDiff
from bottleneck_oracle.errors import OracleError
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.whatif.predict import predict_whatif

__all__ = ["CLOSE_PCT", "SYMPTOMS", "whatif_between"]

CLOSE_PCT = 25.0  # a prediction within this share of the faster run's median step counts as predicting it
_STEPS = 5  # steady steps replayed per candidate, those nearest the median
_CANDIDATES = 4
SYMPTOMS = ("straggler_rank",)  # findings late because of something else the same rank did


def _candidates(diff: RunDiff, slow_is_new: bool) -> list[str]:
    """The edits worth trying on the slower run, causes first."""
    worse = ("appeared", "grew") if slow_is_new else ("went away", "shrank")
    moved = [f for f in diff.moved.get("findings", []) if f["change"] in worse]
    ranks_with_cause = {r for f in moved if f["category"] not in SYMPTOMS for r in f["ranks"]}  # type: ignore[attr-defined]
    symptom = [f for f in moved if f["category"] in SYMPTOMS and set(f["ranks"]) & ranks_with_cause]  # type: ignore[arg-type]
    ordered = [f for f in moved if f not in symptom] + symptom
    edits = list(dict.fromkeys(f"fix {f['category']}" for f in ordered))
    step_delta = abs(diff.delta_ms) or 1.0
    for c in diff.moved.get("collectives", []):
        slow, fast = (c["new_ms"], c["base_ms"]) if slow_is_new else (c["base_ms"], c["new_ms"])
        if c["collective"] != "other" and fast > 0 and slow - fast >= 0.1 * step_delta:  # type: ignore[operator]
            edits.append(f"scale op={c['collective']} x{slow / fast:.2g}")  # type: ignore[operator]
    return edits[:_CANDIDATES]


def _near_median(run: dict[str, Any]) -> list[tuple[int, float]]:
    steps = list(zip(run["steady"], run["steady_ms"]))
    median = float(run["median_ms"])
    return sorted(steps, key=lambda s: (abs(s[1] - median), s[0]))[:_STEPS]


def _predict(a: Analysis, steps: list[tuple[int, float]], text: str) -> float | None:
    """The median of the steps' predicted times under ``text`` (a step the edit does not touch keeps its
    recorded time); None when it touches none."""
    edit = parse_edit(text)
    out, touched = [], False
    for step, recorded in steps:
        try:
            out.append(predict_whatif(a, step, [edit], None).best_ms)
            touched = True
        except OracleError:  # e.g. a fix of a finding this step lacks
            out.append(recorded)
    return float(np.median(out)) if touched else None


def whatif_between(diff: RunDiff, base: Analysis, new: Analysis) -> dict[str, Any] | None:
    """The edit that takes the slower run to the faster one, predicted by the replay; None when the runs
    did not change or no candidate applies."""
    if diff.verdict == "unchanged" or diff.base["median_ms"] is None or diff.new["median_ms"] is None:
        return None
    slow_is_new = diff.verdict == "slower"
    slow, slow_run, fast_run = (new, diff.new, diff.base) if slow_is_new else (base, diff.base, diff.new)
    target = float(fast_run["median_ms"])  # type: ignore[arg-type]
    steps = _near_median(slow_run)
    tried = []
    for text in _candidates(diff, slow_is_new):
        predicted = _predict(slow, steps, text)
        if predicted is not None:
            tried.append({"edit": text, "predicted_ms": round(predicted, 3),
                          "error_pct": round(100 * (predicted - target) / target, 1)})
    if not tried:
        return None
    close = [t for t in tried if abs(t["error_pct"]) <= CLOSE_PCT]  # type: ignore[arg-type]
    chosen = close[0] if close else min(tried, key=lambda t: abs(t["error_pct"]))  # type: ignore[arg-type]
    return {"applied_to": "new" if slow_is_new else "base", "predicts": "base" if slow_is_new else "new",
            "from_ms": slow_run["median_ms"], "target_ms": round(target, 3), **chosen,
            "close": bool(close), "steps": [s for s, _ in steps], "candidates": tried}
