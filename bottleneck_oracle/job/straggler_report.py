"""The straggler analysis of a pipeline job as JSON-ready data (``oracle stragglers --json``, the agent's
tool, the HTTP API), times in seconds, attribution keys as strings, and its timelines for Perfetto."""

from __future__ import annotations

from typing import Any

import numpy as np

from bottleneck_oracle.job.straggler_edits import PipelineWhatIf
from bottleneck_oracle.job.straggler_verdict import Fix, StragglerVerdict, heat
from bottleneck_oracle.job.stragglers import Share, StragglerAnalysis
from bottleneck_oracle.traces.op_table import OPTYPES

__all__ = ["INTERVAL_SOURCE", "straggler_json", "timeline_events"]

INTERVAL_SOURCE = "replay of the job's own steps: 95% interval of their mean, widened by the replay's residual"


def _s(ns: float) -> float:
    return round(float(ns) / 1e9, 6)


def _share(share: Share) -> dict[str, float]:
    return {"removed": round(share.removed, 6), "added": round(share.added, 6),
            "step_time_without_s": _s(share.without.mean_ns), "step_time_only_s": _s(share.only.mean_ns)}


def _fix(f: Fix, base_ns: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "action": f.action, "cause": f.cause, "predicted_step_s": _s(f.predicted_ns),
        "interval_s": [_s(f.interval_ns[0]), _s(f.interval_ns[1])], "saving_s": _s(f.saving_ns),
        "saving_pct": round(100 * f.saving_ns / base_ns, 2), "share_of_gap": round(f.share, 4),
        "source": INTERVAL_SOURCE}
    if f.workers:
        out["workers"] = [{"rank": r, "dp_rank": d, "stage": s} for r, d, s in f.workers]
    if f.stage is not None:
        out["stage"] = f.stage
    return out


def _whatif(w: PipelineWhatIf) -> dict[str, Any]:
    return {"edits": list(w.edits), "predicted_step_s": _s(w.after.mean_ns),
            "interval_s": [_s(w.interval_ns[0]), _s(w.interval_ns[1])], "saving_s": _s(w.saving_ns),
            "saving_pct": round(100 * w.saving_ns / w.before.mean_ns, 2), "assumptions": list(w.assumptions),
            "source": INTERVAL_SOURCE}


def straggler_json(a: StragglerAnalysis, v: StragglerVerdict, whatifs: list[PipelineWhatIf] = ()) -> dict[str, Any]:
    """Everything ``oracle stragglers --json`` prints."""
    g, layout = a.graph, a.graph.table.layout
    rank = g.table.worker_ranks()
    steps = [int(s) for s in g.steps]
    return {
        "job": {"name": layout.name, "source": g.table.source, "dp_size": layout.dp, "pp_size": layout.pp,
                "tp_size": layout.tp, "dsp_size": layout.dsp, "vpp_size": layout.vpp,
                "world_size": layout.world_size, "recorded_workers": layout.dp * layout.pp, "steps": steps,
                "dropped_steps": list(g.dropped_steps)},
        "verdict": v.cause, "cause": v.cause, "secondary_cause": v.secondary or None, "headline": v.headline,
        "explanation": list(v.explanation),
        "slowdown": round(a.slowdown, 6),
        "step_slowdown": {str(s): round(x, 6) for s, x in a.step_slowdown.items()},
        "step_time_s": {"recorded": _s(a.recorded.mean_ns), "no_launch_gaps": _s(a.no_gaps.mean_ns),
                        "ideal": _s(a.ideal.mean_ns), "replayed": _s(a.replayed.mean_ns)},
        "step_times_s": {str(s): {"recorded": _s(r), "no_launch_gaps": _s(n), "ideal": _s(i)}
                         for s, r, n, i in zip(steps, a.recorded.step_ns, a.no_gaps.step_ns, a.ideal.step_ns)},
        "replay_residual": round(a.replay_residual, 6),
        "by_dp_rank": {k: round(x, 6) for k, x in a.by_dp_rank.items()},
        "by_stage": {k: round(x, 6) for k, x in a.by_stage.items()},
        "by_op_type": {k: round(x, 6) for k, x in a.by_op_type.items()},
        "by_worker": {str(rank.get(w, -1)): {"dp_rank": w[0], "stage": w[1], "slowdown": round(x, 6)}
                      for w, x in sorted(a.by_worker.items(), key=lambda kv: -kv[1])},
        "heatmap": {"rows": "dp_rank", "columns": "stage", "values": np.round(heat(a), 4).tolist()},
        "worker_share": round(a.worker_share.removed, 6), "stage_share": round(a.stage_share.removed, 6),
        "work_share": round(a.work_share.removed, 6), "worst_stage": a.worst_stage,
        "shares": {"worker": {**_share(a.worker_share),
                              "workers": [{"rank": rank.get(w, -1), "dp_rank": w[0], "stage": w[1]}
                                          for w in a.worst_workers]},
                   "last_stage": _share(a.stage_share), "worst_stage": _share(a.worst_stage_share),
                   "even_work": _share(a.work_share)},
        "fixes": [_fix(f, a.no_gaps.mean_ns) for f in v.fixes],
        "whatif": sorted((_whatif(w) for w in whatifs), key=lambda w: -w["saving_s"]),
    }


def timeline_events(a: StragglerAnalysis, steps: int = 3) -> list[dict[str, Any]]:
    """Chrome trace events (Perfetto loads them) of the first ``steps`` steps, recorded and ideal: one process
    per worker and timeline, one thread per kind of op, steps laid end to end."""
    g = a.graph
    kept = min(steps, len(g.steps))
    per = g.instances // len(g.steps)
    ideal_times = g.instance_times(g.replay(a.ideal_own))
    events: list[dict[str, Any]] = []
    first = np.repeat(g.start_ns.reshape(len(g.steps), -1).min(1), per)  # a recorder's clock may run on across steps
    timelines = (("recorded", (g.start_ns - first, g.end_ns - first), a.recorded.step_ns),
                 ("ideal", ideal_times, a.ideal.step_ns))
    for offset, (label, (start, end), walls) in enumerate(timelines):
        origin = np.concatenate([[0], np.cumsum(walls[:kept])])
        for i in range(kept):
            rows = slice(i * per, (i + 1) * per)
            for inst, s0, e0 in zip(range(rows.start, rows.stop), start[rows], end[rows]):
                r = g.row[inst]
                code = int(g.table.optype[r])
                events.append({"name": OPTYPES[code], "ph": "X", "cat": label,
                               "ts": (origin[i] + s0) / 1e3, "dur": max(e0 - s0, 0) / 1e3,
                               "pid": offset * 1_000_000 + int(g.table.rank[r]), "tid": _lane(code),
                               "args": {"step": int(g.steps[i]), "seq_id": int(g.table.seq_id[r]),
                                        "mb_id": int(g.table.mb_id[r])}})
    for offset, label in enumerate(("recorded", "ideal")):
        for (d, s), r in g.table.worker_ranks().items():
            events.append({"name": "process_name", "ph": "M", "pid": offset * 1_000_000 + r,
                           "args": {"name": f"{label} rank {r} (dp_rank {d}, stage {s})"}})
    return events


def _lane(code: int) -> int:
    name = OPTYPES[code]
    return 0 if name.endswith("compute") or name in ("optimizer", "gc") else 1 if "send" in name or "recv" in name \
        else 2

