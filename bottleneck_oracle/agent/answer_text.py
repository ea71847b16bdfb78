"""The pieces every offline answer is written with: a template of ``prompts/answers.yaml`` filled
with tool values, a tool's result looked up by name, and numbers written as tools gave them."""

from __future__ import annotations

from typing import Any

from bottleneck_oracle.agent.planner import Result
from bottleneck_oracle.findings.finding import rank_ranges
from bottleneck_oracle.prompts import load_yaml

__all__ = ["confidence_of", "moved", "rank_list", "result_of", "signed", "template", "whatif_check"]


def template(name: str, **values: Any) -> str:
    """The template ``name`` on one line, filled with ``values``."""
    return " ".join(str(load_yaml("answers")[name]).split()).format(**values)


def result_of(results: list[Result], name: str) -> dict[str, Any] | None:
    """The first result of the tool ``name`` in this turn."""
    return next((r.data for r in results if r.name == name), None)


def signed(ms: float) -> str:
    return f"+{ms} ms" if ms > 0 else f"{ms} ms"


def rank_list(ranks: list[int]) -> str:
    """``8, 0-7, 9-15``: in the given order, runs of consecutive ranks joined."""
    return rank_ranges(list(ranks)) or "all"


def moved(values: dict[str, float], limit: int = 3) -> str:
    """The entries of a delta table that moved, largest first as the tool ordered them."""
    shown = [f"{k} {signed(v)}" for k, v in values.items() if abs(v) >= 0.001][:limit]
    return "; ".join(shown) or "nothing"


def confidence_of(predicted: dict[str, float], chosen: str, agree_pct: float = 10.0) -> str:
    """How sure a prediction is, from the predictors the what-if ran: high when they agree within
    ``agree_pct`` percent, medium when they differ or only one ran. Only the tools' numbers are written."""
    values = [v for v in predicted.values() if v is not None]
    if len(values) < 2:
        return f"medium: only {chosen} predicted it"
    each = ", ".join(f"{k} {v} ms" for k, v in predicted.items())
    spread = (max(values) - min(values)) / max(max(values), 1e-9) * 100
    return f"high: the predictors agree, {each}" if spread <= agree_pct else f"medium: trusted {chosen}; {each}"


def whatif_check(trace: str | None, edit: str, step: int | None) -> str:
    """The commands that check a predicted fix: every predictor on the edit, then a re-profile compared
    with the run."""
    name = trace or "TRACE"
    at = f" --step {step}" if step is not None else ""
    if step is not None:  # optimize's edits name their step; --step says it once
        edit = " ".join(w for w in edit.split() if w != f"step={step}")
    return template("check_whatif", trace=name, edit=edit.replace("'", ""), at=at)
