"""The JSON shape of an analysis (``oracle analyze --json``), shared by the CLI and later layers."""

from __future__ import annotations

from typing import TypedDict

from bottleneck_oracle.dag.analysis import Analysis
from bottleneck_oracle.dag.critical_path import StepReport
from bottleneck_oracle.dag.types import CATEGORIES, NodeKind

__all__ = ["analysis_to_dict", "file_ts_us", "AnalysisDict"]


class PathEntry(TypedDict):
    name: str
    kind: str
    category: str
    rank: int
    ts_us: float
    dur_us: float
    contrib_us: float


class StepDict(TypedDict):
    step: int
    rank: int
    wall_ms: float
    critical_path_ms: float
    slow: bool
    partial: bool
    breakdown_ms: dict[str, float]
    critical_path: list[PathEntry]


class AnalysisDict(TypedDict):
    trace: dict[str, object]
    steps: list[StepDict]
    slow_steps: list[dict[str, object]]
    findings: list[dict[str, object]]


def file_ts_us(a: Analysis, rank: int, t_ns: int) -> float:
    """A time of the analysis as the ``ts`` (µs) the rank's trace file uses."""
    return round((int(t_ns) + a.graph.trace.origin_ns - a.graph.trace.rank_info(rank).base_ns) / 1000, 3)


def _path(a: Analysis, r: StepReport) -> list[PathEntry]:
    g = a.graph
    out: list[PathEntry] = []
    for node, cat, rank, start, dur in zip(r.path_node.tolist(), r.path_category.tolist(), r.path_rank.tolist(),
                                           r.path_start_ns.tolist(), r.path_dur_ns.tolist()):
        known = node >= 0
        out.append(PathEntry(
            name=g.node_name(node) if known else "(no op)",
            kind=NodeKind(g.kind[node]).name.lower() if known else "gap",
            category=CATEGORIES[cat].value, rank=rank,
            ts_us=file_ts_us(a, rank, g.start_ns[node] if known else start),
            dur_us=round(int(g.dur_ns[node]) / 1000, 3) if known else round(dur / 1000, 3),
            contrib_us=round(dur / 1000, 3),
        ))
    return out


def _trace_summary(a: Analysis) -> dict[str, object]:
    g = a.graph
    t = g.trace
    return {
        "files": [str(i.path) for i in t.ranks],
        "ranks": [i.rank for i in t.ranks],
        "rank_sources": sorted({i.rank_source for i in t.ranks}),
        "world_size": max((i.world_size or 0 for i in t.ranks), default=0) or None,
        "events": int(sum(i.events for i in t.ranks)),
        "nodes": len(g),
        "edges": len(g.edge_src),
        "steps_annotated": bool((g.steps.step >= 0).any()),
        "collectives": len(g.collectives),
        "collectives_matched": int(g.collectives.reliable.sum()),
        "devices": sorted({d for i in t.ranks for d in i.devices}),
    }


def analysis_to_dict(a: Analysis, step: int | None = None, rank: int | None = None) -> AnalysisDict:
    """The analysis as JSON-ready data, optionally for one step and/or one rank."""
    slow = {(s.step, s.rank) for s in a.slow_steps}
    keep = lambda s, r: (step is None or s == step) and (rank is None or r == rank)  # noqa: E731
    steps = [
        StepDict(
            step=r.step, rank=r.rank, wall_ms=round(r.wall_ns / 1e6, 3),
            critical_path_ms=round(int(r.path_dur_ns.sum()) / 1e6, 3),
            slow=(r.step, r.rank) in slow, partial=(r.step, r.rank) in a.partial_steps,
            breakdown_ms={c.value: round(v / 1e6, 3) for c, v in r.breakdown_ns.items()},
            critical_path=_path(a, r),
        )
        for r in a.steps if keep(r.step, r.rank)
    ]
    return AnalysisDict(
        trace=_trace_summary(a),
        steps=steps,
        slow_steps=[
            {"step": s.step, "rank": s.rank, "wall_ms": round(s.wall_ns / 1e6, 3),
             "median_ms": round(s.median_ns / 1e6, 3), "excess_ms": round(s.excess_ns / 1e6, 3)}
            for s in a.slow_steps if keep(s.step, s.rank)
        ],
        findings=[
            {"category": f.category.value, "step": f.step, "ranks": list(f.ranks), "ops": list(f.ops),
             "impact_ms": f.impact_ms, "evidence": f.evidence}
            for f in a.findings
            if (step is None or f.step in (step, None)) and (rank is None or rank in f.ranks)
        ],
    )
