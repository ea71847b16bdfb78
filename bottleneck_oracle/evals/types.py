"""The evaluation harness's data: a case (a trace and what is true about it) and a suite's result.

Every suite takes cases and returns a ``SuiteResult``: its metrics (the numbers the report shows
and ``oracle eval compare`` gates on) and one row per case, so a regression can be named case by
case. Metric names say which way is better (``METRIC_DIRECTIONS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["METRIC_DIRECTIONS", "Case", "CaseResult", "EditTruth", "Expect", "SuiteResult"]


@dataclass(frozen=True, slots=True)
class EditTruth:
    """A step's true time under an edit (from a re-simulation or a re-capture) and the tolerance."""

    edit: str
    step: int
    true_ms: float
    tolerance_pct: float = 10.0


@dataclass(frozen=True, slots=True)
class Expect:
    """What is true about a case's trace.

    Args:
        category: the bottleneck of ``step`` (DESIGN's vocabulary), ``none`` for a clean trace.
        step: the slow step (for ``none``: the step asked about).
        ranks: the ranks the cause is on; empty when it is on every rank (or ``none``).
        ops: culprit op names: an answer must name at least one (empty for ``none``).
        edits: true step times under edits, for the what-if and optimize suites.
    """

    category: str
    step: int | None
    ranks: tuple[int, ...] = ()
    ops: tuple[str, ...] = ()
    edits: tuple[EditTruth, ...] = ()


@dataclass(frozen=True, slots=True)
class Case:
    """One trace with its questions and its truth.

    Args:
        id: unique in the case set.
        trace: the trace folder (or file).
        questions: what the root-cause suite asks ("why is step N slow?" and paraphrases).
        expect: the truth.
        kind: ``synth``, ``capture`` or ``real``: how the trace was made.
        recipe: how to make the trace again (a synth or capture config as JSON), if known.
        source: the case file it was read from.
    """

    id: str
    trace: Path
    questions: tuple[str, ...]
    expect: Expect
    kind: str = "real"
    recipe: dict[str, Any] | None = None
    source: Path | None = None


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case's outcome in one suite: passed or not, and the details that say why."""

    case: str
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SuiteResult:
    """A suite's metrics (numbers, or dicts of numbers such as per edit type) and its cases."""

    suite: str
    metrics: dict[str, Any]
    cases: tuple[CaseResult, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {**self.metrics, "cases": [{"case": c.case, "passed": c.passed, **c.details} for c in self.cases]}


# +1: higher is better, -1: lower is better; compare flags a move the wrong way beyond the tolerance
METRIC_DIRECTIONS: dict[str, int] = {
    "top1_accuracy": 1, "top3_accuracy": 1, "localization": 1, "op_recall": 1, "precision": 1,
    "false_positive_rate": -1, "groundedness": 1, "answered": 1, "mape": -1, "within_tolerance": 1,
    "first_is_match": 1, "culprit_recall": 1, "latency_p50_s": -1, "latency_p95_s": -1, "tool_calls_mean": -1,
    "step_mape": -1, "criticality_auc": 1, "interval_coverage": 1,
    "gain_error_pct": -1, "clean_false_gains": -1, "within_budget": 1, "criticality_spearman": 1,
    "intent_accuracy": 1, "calls_accuracy": 1, "accuracy": 1, "turn_accuracy": 1, "answer_chars_mean": -1,
}
