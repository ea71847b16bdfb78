"""The timeline of a step as the page draws it: one lane per thread and GPU stream of each rank, the
step's events on them with their slack and category, and its critical path; and a what-if's new
critical path beside the recorded one, so the page can overlay the two.

Times are ms relative to the step's earliest start (``t0_ms``), rounded to 0.1 µs. The critical
path shown is the step's slowest rank's (the one whose wall time is the step's), as ``whatif`` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import NotFoundError
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.graph.intervals import merged
from bottleneck_oracle.graph.points import LANE
from bottleneck_oracle.graph.types import CATEGORIES, Category, NodeKind
from bottleneck_oracle.whatif.predict import WhatIfPrediction
from bottleneck_oracle.workspace.traces import open_trace

__all__ = ["DEFAULT_MAX_EVENTS", "node_categories", "step_timeline", "trace_timeline", "whatif_paths"]

DEFAULT_MAX_EVENTS = 20_000
STRIP_INTERVALS = 4000  # busy intervals per rank the utilization strip sends at most (the shortest gaps close)
_GPU_WORK = (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.COMM)
_NS_PER_MS = 1e6
_BY_KIND = {NodeKind.KERNEL: Category.GPU_COMPUTE, NodeKind.MEMCPY: Category.GPU_COMPUTE,
            NodeKind.MEMSET: Category.GPU_COMPUTE, NodeKind.COMM: Category.COMMUNICATION,
            NodeKind.RUNTIME: Category.LAUNCH_OVERHEAD}


def node_categories(a: Analysis, nodes: np.ndarray) -> np.ndarray:
    """int8[len(nodes)]: where each node's own time goes (index into ``CATEGORIES``): the category
    of most of its time on its lane in the point graph, else one from its kind.

    Shapes:
        nodes: int64[M].
    """
    pg, n = a.points, len(CATEGORIES)
    lane = (pg.origin == LANE) & (pg.owner >= 0)
    owner, cat = pg.owner[lane], pg.category[lane].astype(np.int64)
    time = (pg.t[pg.dst[lane]] - pg.t[pg.src[lane]]).astype(np.float64)
    spent = np.bincount(owner * n + cat, weights=time, minlength=len(a.graph) * n).reshape(-1, n)[nodes]
    kind = a.graph.kind[nodes]
    fallback = np.full(len(nodes), CATEGORIES.index(Category.CPU), dtype=np.int8)
    for k, c in _BY_KIND.items():
        fallback[kind == k] = CATEGORIES.index(c)
    return np.where(spent.max(axis=1) > 0, spent.argmax(axis=1), fallback).astype(np.int8)


def _steps_of(a: Analysis) -> list[int]:
    return sorted(set(a.graph.steps.step.tolist()))


def _rows(a: Analysis, step: int, ranks: Sequence[int] | None) -> np.ndarray:
    """The StepTable rows of ``step`` on ``ranks`` (default: all).

    Raises:
        NotFoundError: a step the trace lacks, or a rank the step lacks (the message lists those there are).
    """
    table = a.graph.steps
    rows = np.flatnonzero(table.step == step)
    if not len(rows):
        raise NotFoundError(f"step {step}: the trace has no such step; its steps are "
                            f"{', '.join(map(str, _steps_of(a)))}")
    if ranks:
        have = set(table.rank[rows].tolist())
        missing = sorted(set(ranks) - have)
        if missing:
            raise NotFoundError(f"rank {missing[0]}: step {step} has ranks {', '.join(map(str, sorted(have)))}")
        rows = rows[np.isin(table.rank[rows], list(ranks))]
    return rows


def _critical_report(a: Analysis, step: int, ranks: set[int]) -> StepReport | None:
    """The report of the step's slowest rank among ``ranks``, complete ones first."""
    reports = [r for r in a.steps if r.step == step and r.rank in ranks]
    if not reports:
        return None
    return max(reports, key=lambda r: ((r.step, r.rank) not in a.partial_steps, r.wall_ns, -r.rank))


def _kept(nodes: np.ndarray, dur: np.ndarray, critical: np.ndarray, budget: int) -> np.ndarray:
    """bool[len(nodes)]: at most ``budget`` of them, critical ones first, then the longest."""
    if len(nodes) <= budget:
        return np.ones(len(nodes), dtype=bool)
    order = np.lexsort((nodes, -dur, ~critical))  # critical first, longest first, then by id
    keep = np.zeros(len(nodes), dtype=bool)
    keep[order[:budget]] = True
    return keep


def _lanes(a: Analysis, lane_ids: np.ndarray) -> list[dict[str, Any]]:
    lanes = a.graph.trace.lanes
    order = sorted(lane_ids.tolist(), key=lambda i: (int(lanes.rank[i]), bool(lanes.is_gpu[i]), i))
    return [{"id": i, "rank": int(lanes.rank[i]), "kind": "stream" if lanes.is_gpu[i] else "thread",
             "label": lanes.label[i]} for i in order]


def _gpu_strip(a: Analysis, rows: np.ndarray, t0: int) -> list[dict[str, Any]]:
    """Per rank of ``rows`` with GPU work: its GPU timeline record over the step's window and the union
    of its GPU work in it as ``busy`` [start_ms, end_ms] pairs relative to ``t0`` (past
    ``STRIP_INTERVALS`` of them, the shortest idle gaps closed)."""
    g, table = a.graph, a.graph.steps
    worked = set(a.gpu_trace.rank.tolist())
    on_gpu = g.trace.lanes.is_gpu[g.lane] & np.isin(g.kind, _GPU_WORK)
    out = []
    for row in sorted(rows.tolist(), key=lambda i: int(table.rank[i])):
        rank = int(table.rank[row])
        if rank not in worked:
            continue
        lo, hi = int(table.start_ns[row]), int(table.end_ns[row])
        work = np.flatnonzero(on_gpu & (g.rank == rank))
        s, e = merged(np.maximum(g.start_ns[work], lo), np.minimum(g.start_ns[work] + g.dur_ns[work], hi))
        keep = e > s
        s, e = s[keep], e[keep]
        if len(s) > STRIP_INTERVALS:
            gaps = s[1:] - e[:-1]
            gap_open = gaps >= np.sort(gaps)[-(STRIP_INTERVALS - 1)]
            first, last = np.concatenate([[True], gap_open]), np.concatenate([gap_open, [True]])
            s, e = s[first], e[last]
        busy = [[round((x - t0) / _NS_PER_MS, 4), round((y - t0) / _NS_PER_MS, 4)]
                for x, y in zip(s.tolist(), e.tolist())]
        out.append({"rank": rank, **a.gpu.record(row), "busy_pct": round(100 * a.gpu.busy_share(row), 1),
                    "start_ms": round((lo - t0) / _NS_PER_MS, 4), "end_ms": round((hi - t0) / _NS_PER_MS, 4),
                    "busy": busy})
    return out


def step_timeline(a: Analysis, step: int, ranks: Sequence[int] | None = None, *,
                  max_events: int = DEFAULT_MAX_EVENTS, trace_id: str = "") -> dict[str, Any]:
    """The events of ``step`` on ``ranks`` (default: every rank), their lanes and the critical path.

    Args:
        max_events: at most this many events; the ones left out are counted in ``dropped``,
            the shortest non-critical ones first.
        trace_id: copied into the result.

    Returns:
        ``{"trace_id", "step", "t0_ms", "span_ms", "critical_rank", "lanes", "events",
        "critical_path", "dropped", "gpu"}``; events sorted by start (longest first at one start), each
        ``{"id", "lane", "name", "start_ms", "dur_ms", "category", "slack_ms", "critical", "depth"}``;
        ``gpu`` one entry per rank with GPU work (empty: no GPU events), its GPU timeline record
        (``busy_ms``, ..., ``busy_pct``), its window and its ``busy`` intervals (``_gpu_strip``).

    Raises:
        NotFoundError: a step the trace lacks, or a rank the step lacks.
        ValueError: ``max_events`` below 1.
    """
    if max_events < 1:
        raise ValueError(f"max_events {max_events}: give at least 1")
    g, table = a.graph, a.graph.steps
    rows = _rows(a, step, ranks)
    chosen = set(table.rank[rows].tolist())
    report = _critical_report(a, step, chosen)
    path = report.path_nodes() if report is not None else np.zeros(0, dtype=np.int64)
    path = path[np.isin(g.rank[path], list(chosen))]
    nodes = np.union1d(np.flatnonzero(np.isin(g.step_row, rows)), path).astype(np.int64)
    t0, t1 = int(table.start_ns[rows].min()), int(table.end_ns[rows].max())
    critical = np.isin(nodes, path)
    lane_ids = np.unique(g.lane[nodes])
    keep = _kept(nodes, g.dur_ns[nodes], critical, max_events)
    dropped = int((~keep).sum())
    nodes = nodes[keep]
    nodes = nodes[np.lexsort((nodes, -g.dur_ns[nodes], g.start_ns[nodes]))]
    critical = np.isin(nodes, path)
    names = a.graph.trace.strings
    category = node_categories(a, nodes)
    events = [
        {"id": n, "lane": lane, "name": names[name], "start_ms": round((start - t0) / _NS_PER_MS, 4),
         "dur_ms": round(dur / _NS_PER_MS, 4), "category": CATEGORIES[c].value,
         "slack_ms": round(slack / _NS_PER_MS, 4), "critical": crit, "depth": depth}
        for n, lane, name, start, dur, c, slack, crit, depth in zip(
            nodes.tolist(), g.lane[nodes].tolist(), g.name[nodes].tolist(), g.start_ns[nodes].tolist(),
            g.dur_ns[nodes].tolist(), category.tolist(), a.slack_ns[nodes].tolist(), critical.tolist(),
            g.depth[nodes].tolist())
    ]
    return {"trace_id": trace_id, "step": step, "t0_ms": round(t0 / _NS_PER_MS, 4),
            "span_ms": round((t1 - t0) / _NS_PER_MS, 4), "critical_rank": report.rank if report else None,
            "lanes": _lanes(a, lane_ids), "events": events, "critical_path": path.tolist(), "dropped": dropped,
            "gpu": _gpu_strip(a, rows, t0)}


def trace_timeline(ref: str | Path | Sequence[Path], step: int, settings: Settings, *,
                   ranks: Sequence[int] | None = None, max_events: int = DEFAULT_MAX_EVENTS) -> dict[str, Any]:
    """``step_timeline`` of the trace ``ref`` names (a path, or a trace the workspace knows).

    Raises:
        NotFoundError: a trace, step or rank that is not there. TraceFormatError: a bad file.
    """
    resolved = open_trace(ref, settings)
    return step_timeline(resolved.analysis, step, ranks, max_events=max_events, trace_id=resolved.entry.trace_id)


def whatif_paths(p: WhatIfPrediction) -> dict[str, Any]:
    """The what-if as the page reads it: ``WhatIfPrediction.to_json()`` with ``critical_path`` the
    node ids of the step's critical path after the edits (empty for a schedule prediction) and
    ``old_critical_path`` those of the recorded one; the recorded path's summary moves to
    ``critical_path_summary``."""
    out = p.to_json()
    out["critical_path_summary"] = out.pop("critical_path")
    out["critical_path"] = list(p.after.nodes) if p.after is not None else []
    out["old_critical_path"] = list(p.before.nodes)
    return out
