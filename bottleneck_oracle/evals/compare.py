"""Two evaluation reports side by side: the metrics that moved the wrong way, and the cases that
passed before and fail now (what ``oracle eval compare`` gates CI on)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bottleneck_oracle.evals.types import METRIC_DIRECTIONS

__all__ = ["Comparison", "MetricChange", "compare_reports"]

MetricChange = tuple[str, str, float, float]  # (suite, metric path such as "mape.scale.replay", old, new)
# keys of a suite's JSON that compare does not gate on: the case rows (compared one by one) and the
# baselines (they measure the floor, not the oracle)
_SKIPPED = frozenset({"cases", "baselines"})
# sizes, not scores: never compared, even inside a scored dict ("mape_by_edit_type": {"scale": {"n": 4}})
_COUNTS = frozenset({"n", "skipped", "failed", "steps", "seconds", "count"})
# dicts whose numbers are another metric broken down: per_category holds top-1 accuracy per category
_ALIASES = {"per_category": "top1_accuracy"}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _direction(key: str, inherited: int | None) -> int | None:
    """Which way is better for ``key``: its own entry in ``METRIC_DIRECTIONS``; that of the name it
    extends (``mape_by_edit_type`` is a ``mape``); 0 (never compared) for counts; else its parent's."""
    if key in METRIC_DIRECTIONS:
        return METRIC_DIRECTIONS[key]
    if key in _COUNTS or key.startswith("n_"):
        return 0
    if key in _ALIASES:
        return METRIC_DIRECTIONS[_ALIASES[key]]
    extended = [name for name in METRIC_DIRECTIONS if key.startswith(f"{name}_")]
    return METRIC_DIRECTIONS[max(extended, key=len)] if extended else inherited


def _leaves(body: dict[str, Any], path: tuple[str, ...] = (), direction: int | None = None,
            ) -> Iterator[tuple[str, int, float]]:
    """(dotted path, direction, value) of every number under ``body`` that ``_direction`` gives a
    direction, by its own name or the nearest name above it (``mape_by_edit_type`` -> edit type ->
    predictor)."""
    for key, value in body.items():
        if not path and key in _SKIPPED:
            continue
        here = _direction(str(key), direction)
        if isinstance(value, dict):
            yield from _leaves(value, (*path, str(key)), here)
        elif here and _is_number(value):
            yield ".".join((*path, str(key))), here, float(value)


def _passed(body: dict[str, Any]) -> dict[str, bool]:
    rows = body.get("cases") or []
    return {str(r["case"]): bool(r.get("passed")) for r in rows if isinstance(r, dict) and "case" in r}


def _changes_table(title: str, changes: list[MetricChange]) -> list[str]:
    if not changes:
        return []
    lines = [f"## {title}", "", "| suite | metric | old | new |", "|---|---|---|---|"]
    lines += [f"| {s} | {m} | {o:.4g} | {n:.4g} |" for s, m, o, n in changes]
    return lines + [""]


@dataclass(frozen=True, slots=True)
class Comparison:
    """What changed from an old report to a new one.

    Args:
        regressions: metrics that moved the wrong way by more than the tolerance.
        improvements: metrics that moved the right way by more than the tolerance.
        case_regressions: (suite, case id) of cases that passed in the old report and fail in the new.
        case_fixes: (suite, case id) of cases that failed before and pass now.
        missing: suites, or (suite, case id) as ``suite/case``, in the old report and not in the new.
    """

    regressions: list[MetricChange] = field(default_factory=list)
    improvements: list[MetricChange] = field(default_factory=list)
    case_regressions: list[tuple[str, str]] = field(default_factory=list)
    case_fixes: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def has_regression(self) -> bool:
        """Whether any metric or any case regressed (what makes ``oracle eval compare`` exit 1)."""
        return bool(self.regressions or self.case_regressions)

    def to_markdown(self) -> str:
        """The comparison for a person: a verdict line, then the tables of what moved."""
        verdict = (f"**{len(self.regressions)} metric regression(s), {len(self.case_regressions)} case "
                   "regression(s)**" if self.has_regression else "**no regression**")
        lines = ["# Evaluation compared", "", verdict, ""]
        lines += _changes_table("Regressions", self.regressions)
        if self.case_regressions:
            lines += ["## Cases that passed before and fail now", ""]
            lines += [f"- {suite}: `{case}`" for suite, case in self.case_regressions] + [""]
        lines += _changes_table("Improvements", self.improvements)
        if self.case_fixes:
            lines += ["## Cases that failed before and pass now", ""]
            lines += [f"- {suite}: `{case}`" for suite, case in self.case_fixes] + [""]
        if self.missing:
            lines += ["## In the old report only (not compared)", ""] + [f"- {m}" for m in self.missing] + [""]
        return "\n".join(lines).rstrip() + "\n"


def compare_reports(old: dict[str, Any], new: dict[str, Any], *, tolerance: float = 0.01) -> Comparison:
    """Compares two report documents (``read_report``) metric by metric and case by case.

    A metric is compared when its name is in ``METRIC_DIRECTIONS``, or extends one
    (``mape_by_edit_type``), or sits in a dict so named (MAPE per edit type and predictor is compared
    leaf by leaf); ``per_category`` is top-1 accuracy per category; counts (``n``, ``n_*``,
    ``skipped``), other names, ``meta`` and the baselines are ignored.
    A move the wrong way counts as a regression when it exceeds ``tolerance * max(1, |old|)``:
    absolute for rates in [0, 1], relative for larger numbers (MAPE in percent, latencies).
    A metric or case present on one side only is not a regression.

    Args:
        old: the reference report.
        new: the report under test.
        tolerance: the move a metric may make the wrong way without being flagged.

    Returns:
        The regressions and improvements, each in report order.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be at least 0, got {tolerance}")
    result = Comparison()
    for suite, old_body in old.items():
        if suite == "meta" or not isinstance(old_body, dict):
            continue
        new_body = new.get(suite)
        if not isinstance(new_body, dict):
            result.missing.append(suite)
            continue
        now = {path: value for path, _, value in _leaves(new_body)}
        for path, direction, before in _leaves(old_body):
            after = now.get(path)
            if after is None:
                continue
            moved = (after - before) * direction
            if abs(moved) > tolerance * max(1.0, abs(before)):
                (result.improvements if moved > 0 else result.regressions).append((suite, path, before, after))
        passed_now = _passed(new_body)
        for case, passed_before in _passed(old_body).items():
            if case not in passed_now:
                result.missing.append(f"{suite}/{case}")
            elif passed_before and not passed_now[case]:
                result.case_regressions.append((suite, case))
            elif not passed_before and passed_now[case]:
                result.case_fixes.append((suite, case))
    return result
