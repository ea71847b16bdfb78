"""The JSON shape of a scan (``oracle scan --json``): an analysis's shape (``analysis/report.py``) for a job
read one rank at a time, with its arrivals, its summaries' sizes and its replay of edits."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.analysis.clocks import moved_clocks
from bottleneck_oracle.analysis.report import finding_to_dict, ms_or_none, step_medians
from bottleneck_oracle.findings.finding import ms
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.graph.types import CATEGORIES
from bottleneck_oracle.job.scan import Scan
from bottleneck_oracle.truth.edits import format_edit

__all__ = ["scan_to_dict"]


def _scan_top(s: Scan, r: StepReport, top: int) -> list[dict[str, object]]:
    """The ``top`` segments of a scanned step's critical path: what ``top_contributors`` says, but the op's own
    times (a scan keeps the path, not the graph)."""
    largest = np.argsort(-r.path_dur_ns, kind="stable")[:top].tolist()
    return [{"name": s.names(int(r.path_node[i])) if r.path_node[i] >= 0 else "(no op)",
             "category": CATEGORIES[int(r.path_category[i])].value, "rank": int(r.path_rank[i]),
             "contrib_us": round(int(r.path_dur_ns[i]) / 1000, 3)} for i in largest]


def scan_to_dict(s: Scan, top_late: int = 20, top: int = 10) -> dict[str, object]:
    """A scan (``job/scan.py``) as JSON-ready data: each step of each rank (its breakdown and the ``top`` ops of
    its critical path), the slow steps, the stragglers, every finding with the slow steps' causes and the
    GPU-bound steps (as ``analysis_to_dict``'s; empty without the paths), the latest arrivals at collectives
    (``top_late``, by the lateness each rank made itself), the GPU per rank."""
    slow = {(x.step, x.rank) for x in s.slow_steps}
    median_ns = step_medians(s.steps, s.partial_steps)
    gpu_row = {key: i for i, key in enumerate(s.gpu_steps)}
    gpu_ranks = set(s.gpu_trace.rank.tolist())
    late = sorted((c for c in s.arrivals if c.own_ns > 0), key=lambda c: -c.own_ns)[:top_late]
    size = np.array(s.summary_bytes or [0])
    return {
        "ranks": list(s.ranks), "events": s.events, "collectives": len(s.collectives),
        "collectives_matched": int(s.collectives.reliable.sum()),
        "summary_bytes": {"median": int(np.median(size)), "max": int(size.max()), "total": int(size.sum())},
        "seconds": {stage: round(t, 3) for stage, t in s.seconds.items()},
        "clocks": moved_clocks(s.clocks) if s.clocks is not None and s.clocks.any() else None,
        "steps": [{"step": r.step, "rank": r.rank, "wall_ms": round(r.wall_ns / 1e6, 3), "slow": (r.step, r.rank) in slow,
                   "partial": (r.step, r.rank) in s.partial_steps, "median_ms": ms_or_none(median_ns.get((r.step, r.rank))),
                   **({"critical_path_ms": round(int(r.path_dur_ns.sum()) / 1e6, 3),
                       "critical_path_len": len(r.path_node),
                       "breakdown_ms": {c.value: round(v / 1e6, 3) for c, v in r.breakdown_ns.items()},
                       "top_contributors": _scan_top(s, r, top)} if r.breakdown_ns else {}),
                   **({"gpu": s.gpu.record(gpu_row[(r.step, r.rank)])} if r.rank in gpu_ranks else {})}
                  for r in s.steps],
        "slow_steps": [{"step": x.step, "rank": x.rank, "wall_ms": round(x.wall_ns / 1e6, 3),
                        "median_ms": round(x.median_ns / 1e6, 3), "excess_ms": round(x.excess_ns / 1e6, 3)}
                       for x in s.slow_steps],
        "stragglers": [finding_to_dict(f) for f in s.stragglers],
        "findings": [finding_to_dict(f) for f in s.findings],
        "gpu_bound": [b.to_dict() for b in s.gpu_bound],
        "late_arrivals": [{"step": c.step, "kind": c.kind, "rank": c.last_rank, "ranks": len(c.ranks),
                           "lateness_ms": round(c.lateness_ns / 1e6, 3), "passed_on_ms": round(c.relayed_ns / 1e6, 3)}
                          for c in late],
        "gpu_timeline": [{"rank": int(s.gpu_trace.rank[i]), **s.gpu_trace.record(i)} for i in range(len(s.gpu_trace))],
        "whatif": _whatif(s),
    }


def _whatif(s: Scan) -> dict[str, object] | None:
    """A scan's replay of edits: per complete step, its recorded wall time and its replay's, each its slowest
    rank's, as ``oracle whatif`` gives them (its ``baseline_ms`` and ``replay`` prediction)."""
    if s.whatif is None:
        return None
    before: dict[int, StepReport] = {}
    after: dict[int, tuple[int, int]] = {}
    for r in s.steps:
        if (r.step, r.rank) in s.partial_steps:
            continue
        if r.step not in before or r.wall_ns > before[r.step].wall_ns:
            before[r.step] = r
        wall = s.whatif.after_ns[(r.step, r.rank)]
        if r.step not in after or wall > after[r.step][0]:
            after[r.step] = (wall, r.rank)
    return {"edits": [format_edit(e) for e in s.whatif.edits], "touched": list(s.whatif.touched),
            "steps": [{"step": step, "recorded_ms": ms(before[step].wall_ns), "recorded_rank": before[step].rank,
                       "replay_ms": ms(after[step][0]), "replay_rank": after[step][1],
                       "saved_ms": round(ms(before[step].wall_ns) - ms(after[step][0]), 3)} for step in sorted(before)]}
