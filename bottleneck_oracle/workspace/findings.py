"""The findings of a trace as a list a person reads: each bottleneck with a one-line summary and the
playbook's first remedy for its category."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.analysis.report import finding_to_dict
from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb.playbook import PlaybookEntry, read_playbook
from bottleneck_oracle.workspace.traces import open_trace

__all__ = ["finding_rows", "trace_findings"]


def _summary(category: str, step: int | None, ranks: Sequence[int], impact_ms: float) -> str:
    where = f"step {step}" if step is not None else "every step"
    who = f" on rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}" if ranks else ""
    return f"{category.replace('_', ' ')} in {where}{who}: {impact_ms:.3f} ms at stake"


def finding_rows(a: Analysis, playbook: Sequence[PlaybookEntry]) -> list[dict[str, Any]]:
    """The findings of ``a``, largest impact first, each with ``summary`` and ``remedy`` (the title and
    text of the playbook's first entry for its category; None when it has none)."""
    first: dict[str, PlaybookEntry] = {}
    for e in playbook:
        first.setdefault(e.category.value, e)
    rows = []
    for f in a.findings:
        category = f.category.value
        remedy = first.get(category)
        rows.append({**finding_to_dict(f), "summary": _summary(category, f.step, f.ranks, f.impact_ms),
                     "remedy": f"{remedy.title}: {remedy.remedy}" if remedy else None})
    return rows


def trace_findings(ref: str | Path | Sequence[Path], settings: Settings) -> list[dict[str, Any]]:
    """``finding_rows`` of the trace ``ref`` names (a path, or a trace the workspace knows).

    Raises:
        NotFoundError: a trace that is not known. TraceFormatError: a bad file.
    """
    return finding_rows(open_trace(ref, settings).analysis, read_playbook())
