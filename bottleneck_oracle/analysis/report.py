"""The JSON shape of an analysis (``oracle analyze --json``), shared by the CLI, a scan's shape
(``job/scan_report.py``) and later layers.

By default each step carries its breakdown, its critical path's length and its top contributors;
whole paths (``full_paths``) come as columns, one list per field, built from the path arrays
without a Python object per segment.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.analysis.clocks import moved_clocks
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import Finding, ms, untraced_wait_ns
from bottleneck_oracle.findings.gpu_bound import gpu_bound_steps
from bottleneck_oracle.analysis.health import trace_health
from bottleneck_oracle.findings.slow_steps import compare_steps
from bottleneck_oracle.graph.types import CATEGORIES, NodeKind

__all__ = [
    "AnalysisDict", "PathColumns", "analysis_to_dict", "cause_text", "file_ts_us", "finding_to_dict", "ms_or_none",
    "step_medians",
    "TOP_CONTRIBUTORS",
]

TOP_CONTRIBUTORS = 10  # path segments listed per step by default, largest first
_KINDS = np.array([k.name.lower() for k in NodeKind] + ["gap"], dtype=object)  # "gap": no node
_CATEGORIES = np.array([c.value for c in CATEGORIES], dtype=object)


class PathEntry(TypedDict):
    name: str
    kind: str
    category: str
    rank: int
    ts_us: float
    dur_us: float
    contrib_us: float


class PathColumns(TypedDict):
    """A whole critical path, in order: entry i of every list is segment i (a PathEntry's fields)."""

    name: list[str]
    kind: list[str]
    category: list[str]
    rank: list[int]
    ts_us: list[float]
    dur_us: np.ndarray
    contrib_us: np.ndarray


class StepDict(TypedDict, total=False):
    step: int
    rank: int
    start_us: float  # the step's window, as the rank's file writes ``ts``
    end_us: float
    wall_ms: float
    median_ms: float | None  # of the rank's other complete steps; None below three steps or when partial
    critical_path_ms: float
    critical_path_len: int
    slow: bool
    partial: bool
    breakdown_ms: dict[str, float]
    untraced_wait_ms: float  # of the idle: GPU work waiting for what the trace does not show (findings/finding.py)
    gpu: dict[str, float] | None  # the GPU timeline over the step's window (graph/gpu_timeline.py); None: no GPU
    top_contributors: list[PathEntry]
    critical_path: PathColumns  # with full_paths only


class AnalysisDict(TypedDict):
    trace: dict[str, object]
    gpu_timeline: list[dict[str, float]]  # one record per rank with GPU work, over the trace's window
    gpu_bound: list[dict[str, object]]  # steps (or ranks) whose GPU was busy most of the window
    steps: list[StepDict]
    slow_steps: list[dict[str, object]]
    findings: list[dict[str, object]]


def file_ts_us(a: Analysis, rank: int, t_ns: int) -> float:
    """A time of the analysis as the ``ts`` (µs) the rank's trace file uses."""
    return round((int(t_ns) + a.graph.trace.origin_ns - a.graph.trace.rank_info(rank).base_ns) / 1000, 3)


def _segments(a: Analysis, r: StepReport, which: np.ndarray) -> PathColumns:
    """Columns of the path segments ``which`` (positions into the step's path arrays)."""
    g = a.graph
    node = r.path_node[which]
    known = node >= 0
    safe = np.where(known, node, 0)
    names = np.asarray(g.trace.strings, dtype=object)[g.name[safe]]
    names[~known] = "(no op)"
    kind = _KINDS[np.where(known, g.kind[safe], len(_KINDS) - 1)]
    rank = r.path_rank[which]
    start = np.where(known, g.start_ns[safe], r.path_start_ns[which])
    shift = {int(x): a.graph.trace.origin_ns - a.graph.trace.rank_info(int(x)).base_ns for x in np.unique(rank)}
    # Python ints: epoch-scale ns lose digits in float64 before the division
    ts_us = [(t + shift[k]) / 1000 for t, k in zip(start.tolist(), rank.tolist())]
    return PathColumns(
        name=names.tolist(), kind=kind.tolist(), category=_CATEGORIES[r.path_category[which]].tolist(),
        rank=rank.tolist(), ts_us=ts_us,
        dur_us=np.where(known, g.dur_ns[safe], r.path_dur_ns[which]) / 1000, contrib_us=r.path_dur_ns[which] / 1000,
    )


def _top(a: Analysis, r: StepReport, top: int) -> list[PathEntry]:
    largest = np.argsort(-r.path_dur_ns, kind="stable")[:top]
    cols = _segments(a, r, largest)
    return [PathEntry(name=n, kind=k, category=c, rank=rk, ts_us=round(t, 3), dur_us=round(float(d), 3),
                      contrib_us=round(float(w), 3))
            for n, k, c, rk, t, d, w in zip(*cols.values())]


def _trace_summary(a: Analysis) -> dict[str, object]:
    g = a.graph
    t = g.trace
    return {
        "files": [str(i.path) for i in t.ranks],
        "ranks": [i.rank for i in t.ranks],
        "rank_sources": sorted({i.rank_source for i in t.ranks}),
        "world_size": max((i.world_size or 0 for i in t.ranks), default=0) or None,
        "events": int(sum(i.events for i in t.ranks)),
        # malformed events left out, by reason, most frequent first
        "skipped_events": dict(sorted(t.skipped_events.items(), key=lambda kv: (-kv[1], kv[0]))),
        "nodes": len(g),
        "edges": len(g.edge_src),
        "steps_annotated": bool((g.steps.step >= 0).any()),
        "steps_from": a.steps_from,
        "collectives": len(g.collectives),
        "collectives_matched": int(g.collectives.reliable.sum()),
        "devices": sorted({d for i in t.ranks for d in i.devices}),
        # what the trace can and cannot support, one line each
        "health": [{"code": n.code.value, "message": n.message} for n in trace_health(a)],
    }


def step_medians(steps: tuple[StepReport, ...], partial: frozenset[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """(step, rank) → the median wall of the rank's other complete steps (``compare_steps``)."""
    return {(x.step, x.rank): x.median_ns for x, _ in compare_steps([r for r in steps if (r.step, r.rank) not in partial])}


def ms_or_none(ns: int | None) -> float | None:
    """``ns`` in ms, or None."""
    return None if ns is None else ms(ns)


def _step(a: Analysis, r: StepReport, slow: set[tuple[int, int]], median_ns: dict[tuple[int, int], int],
          full_paths: bool, top: int, gpu_rows: dict[tuple[int, int], int]) -> StepDict:
    median = median_ns.get((r.step, r.rank))
    row = gpu_rows.get((r.step, r.rank))
    out = StepDict(
        step=r.step, rank=r.rank, start_us=file_ts_us(a, r.rank, r.start_ns), end_us=file_ts_us(a, r.rank, r.end_ns),
        wall_ms=round(r.wall_ns / 1e6, 3),
        median_ms=ms_or_none(median),
        critical_path_ms=round(int(r.path_dur_ns.sum()) / 1e6, 3), critical_path_len=len(r.path_node),
        slow=(r.step, r.rank) in slow, partial=(r.step, r.rank) in a.partial_steps,
        breakdown_ms={c.value: round(v / 1e6, 3) for c, v in r.breakdown_ns.items()},
        untraced_wait_ms=round(untraced_wait_ns(a.graph, r) / 1e6, 3),
        gpu=None if row is None else a.gpu.record(row), top_contributors=_top(a, r, top),
    )
    if full_paths:
        out["critical_path"] = _segments(a, r, np.arange(len(r.path_node)))
    return out


def finding_to_dict(f: Finding) -> dict[str, object]:
    """One finding as JSON-ready data; ``cause``: the cause of its step (``findings/cause.py``), with the ranks
    that waited for it and how long (``waited``)."""
    return {"category": f.category.value, "step": f.step, "ranks": list(f.ranks), "ops": list(f.ops),
            "impact_ms": f.impact_ms, "severity": f.severity, "waiting": list(f.waiting), "evidence": f.evidence,
            "cause": f.cause, "waited": [{"rank": r, "ms": w} for r, w in zip(f.waiting, f.waited_ms)]}


def cause_text(f: dict[str, object]) -> str:
    """A step's cause in one line (``finding_to_dict``'s shape): what, on which rank, and who waited."""
    ranks = list(f["ranks"])  # type: ignore[call-overload]
    waited = list(f.get("waited") or [])  # type: ignore[call-overload]
    who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"
    line = f"{f['category']} on {who} ({f['impact_ms']} ms)"
    if waited:
        line += "; " + ", ".join(f"rank {w['rank']} waited {w['ms']} ms" for w in waited)
    return line


def analysis_to_dict(a: Analysis, step: int | None = None, rank: int | None = None, *,
                     full_paths: bool = False, top: int = TOP_CONTRIBUTORS) -> AnalysisDict:
    """The analysis as JSON-ready data (numpy arrays where a path is whole), optionally for one step
    and/or one rank.

    Args:
        full_paths: also give every step's whole critical path, as ``PathColumns``.
        top: how many of each path's largest segments ``top_contributors`` lists.
    """
    slow = {(s.step, s.rank) for s in a.slow_steps}
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps]
    median_ns = step_medians(a.steps, a.partial_steps)
    keep = lambda s, r: (step is None or s == step) and (rank is None or r == rank)  # noqa: E731
    gpu_ranks = set(a.gpu_trace.rank.tolist())
    g = a.graph
    gpu_rows = {key: i for key, i in g.steps.row_of().items() if key[1] in gpu_ranks}
    bound = gpu_bound_steps(g, a.gpu, [(r.step, r.rank) for r in complete])
    return AnalysisDict(
        trace=_trace_summary(a),
        gpu_timeline=[{"rank": int(a.gpu_trace.rank[i]), **a.gpu_trace.record(i)} for i in range(len(a.gpu_trace))
                      if rank is None or a.gpu_trace.rank[i] == rank],
        gpu_bound=[b.to_dict() for b in bound if (step is None or b.step in (step, None)) and (rank is None or b.rank == rank)],
        steps=[_step(a, r, slow, median_ns, full_paths, top, gpu_rows) for r in a.steps if keep(r.step, r.rank)],
        slow_steps=[
            {"step": s.step, "rank": s.rank, "wall_ms": round(s.wall_ns / 1e6, 3),
             "median_ms": round(s.median_ns / 1e6, 3), "excess_ms": round(s.excess_ns / 1e6, 3)}
            for s in a.slow_steps if keep(s.step, s.rank)
        ],
        findings=[
            finding_to_dict(f) for f in a.findings
            if (step is None or f.step in (step, None)) and (rank is None or rank in f.ranks)
        ],
    )
