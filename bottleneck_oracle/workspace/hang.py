"""Why a job hung: its Flight Recorder dumps read (``analysis/hang.py``), joined where asked with the profiler
traces of the same job, so the verdict says what the culprit was doing in its last profiled step."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.analysis.hang import hang_verdict
from bottleneck_oracle.analysis.report import cause_text, finding_to_dict
from bottleneck_oracle.config import Settings
from bottleneck_oracle.executor import executor_of
from bottleneck_oracle.traces.flight_recorder import read_flight_record
from bottleneck_oracle.workspace.traces import open_trace

__all__ = ["hang_report", "last_profiled"]

_TOP = 3


def hang_report(dumps: Path, settings: Settings, *, prefix: str | None = None,
                traces: str | Path | Sequence[Path] | None = None) -> dict[str, Any]:
    """The hang verdict of the dumps in ``dumps`` as JSON-ready data; with ``traces``, ``profiled``: what each
    culprit (else each waiting rank) did in its last profiled step.

    Raises:
        TraceFormatError: no readable dump, or one that would run code when loaded (nothing in it runs).
    """
    verdict = hang_verdict(read_flight_record(Path(dumps), prefix, executor_of(settings)))
    out = {"dumps": str(dumps), **verdict.to_json()}
    if traces is not None:
        out["profiled_from"] = str(traces)
        shown = verdict.culprit_ranks or verdict.waiting_ranks
        out["profiled"] = last_profiled(open_trace(traces, settings).analysis, shown)
    return out


def last_profiled(a: Analysis, ranks: Sequence[int]) -> list[dict[str, Any]]:
    """For each rank, its last profiled step: wall time, where the time went, its longest ops on the critical
    path, and the findings that name the rank in that step or in every step."""
    out = []
    for rank in ranks:
        reports = [r for r in a.steps if r.rank == rank]
        if not reports:
            out.append({"rank": rank, "step": None, "note": f"rank {rank} is not in the profiled traces"})
            continue
        last = max(reports, key=lambda r: r.step)
        top = sorted(((c.value, round(v / 1e6, 3)) for c, v in last.breakdown_ns.items() if v > 0),
                     key=lambda kv: -kv[1])[:_TOP]
        findings = [finding_to_dict(f) for f in a.findings
                    if rank in f.ranks and (f.step is None or f.step == last.step)]
        out.append({"rank": rank, "step": last.step, "wall_ms": round(last.wall_ns / 1e6, 3),
                    "partial": (last.step, rank) in a.partial_steps, "breakdown_ms": dict(top),
                    "top_ops": _top_ops(a, last), "findings": [cause_text(f) for f in findings]})
    return out


def _top_ops(a: Analysis, report: Any) -> list[dict[str, Any]]:
    g = a.graph
    spent: dict[str, int] = {}
    for node, dur in zip(report.path_node.tolist(), report.path_dur_ns.tolist()):
        if node >= 0:
            name = g.trace.strings[int(g.name[node])]
            spent[name] = spent.get(name, 0) + int(dur)
    return [{"op": name, "ms": round(ns / 1e6, 3)} for name, ns in sorted(spent.items(), key=lambda kv: -kv[1])[:_TOP]]
