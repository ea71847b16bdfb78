"""The questions people ask after "why is step N slow?", answered from a loaded trace: what bounds the
job as a whole over its steady steps, the top ops of a step or of the run, what a rank would give if
it behaved like its peers, and what one change saves over every step of the run. Times in ms rounded
to 3 decimals, like ``steps.py``'s."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from bottleneck_oracle.analysis import Analysis
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.findings.slow_steps import NOISE_FLOOR, SLOW_MADS, SLOW_RATIO, compare_steps
from bottleneck_oracle.graph import NodeKind, readable_kernel_name
from bottleneck_oracle.graphdb import GraphStore
from bottleneck_oracle.truth.edits import format_edit, parse_edit
from bottleneck_oracle.whatif.predict import baseline_ms, predict_whatif
from bottleneck_oracle.whatif.run_verdict import run_verdict
from bottleneck_oracle.workspace import steps as step_questions
from bottleneck_oracle.workspace.loaded import LoadedTrace
from bottleneck_oracle.workspace.traces import open_trace
from bottleneck_oracle.workspace.whatif import whatif_trace

__all__ = ["BOUNDS", "job_bound", "rank_like_peers", "run_verdict_of", "slowest_step", "top_kernels", "top_ops", "whatif_run"]

# the attribution's categories, grouped by what bounds a job; the idle time in which GPU work waited for
# what the trace does not show (``untraced_wait``) is no host time: the trace cannot say what bounds it
BOUNDS = {"input": ("data_loading",), "communication": ("communication", "sync_wait"),
          "host": ("cpu", "launch_overhead", "idle"), "gpu": ("gpu_compute",), "untraced": ("untraced_wait",)}


def _ms(value: float) -> float:
    return round(float(value), 3)


def job_bound(store: GraphStore, t: LoadedTrace, settings: Settings) -> dict[str, Any]:
    """What bounds the run over its steady steps: its verdict (``run``: ``whatif.run_verdict``, the rule every
    surface states; ``bound`` is its cause), the wall time of each group of attribution categories, what the
    GPU did (None without GPU events), and its slowest step against the slow-step rule (``slowest``)."""
    a = open_trace(t.trace_id, settings).analysis
    verdict = run_verdict(a)
    rows = [r for r in step_questions.step_rows(store, t) if not r["partial"] and r["step"] in verdict.steady]
    full = {(r["step"], r["rank"]): r for r in store.read("trace_steps", {"trace": t.trace_id})}
    wall = sum(r["wall_ms"] for r in rows)
    cats: dict[str, float] = defaultdict(float)
    for r in rows:
        row = full[(r["step"], r["rank"])]
        for group in BOUNDS.values():
            for c in group:
                cats[c] += float(row[f"{c}_ms"] or 0.0)
        cats["idle"] -= float(row["untraced_wait_ms"] or 0.0)
    shares = {b: round(100 * sum(cats[c] for c in cs) / wall, 1) if wall else 0.0 for b, cs in BOUNDS.items()}
    gpus = [r["gpu"] for r in rows if r["gpu"] is not None]
    gpu = None
    if gpus:
        gpu_wall = sum(r["wall_ms"] for r in rows if r["gpu"] is not None)
        gpu = {f: _ms(sum(g[f] for g in gpus)) for f in ("busy_ms", "idle_ms", "comm_ms", "exposed_comm_ms")}
        gpu["busy_pct"] = round(100 * gpu["busy_ms"] / gpu_wall, 1) if gpu_wall else 0.0
    run = verdict.to_json()
    bound = "gpu" if verdict.cause is None else verdict.cause.name
    return {"trace": t.name, "bound": bound, "verdict": verdict.verdict, "run": run, "steps": list(verdict.steady),
            "steady_steps": len(verdict.steady), "ranks": len({r["rank"] for r in rows}), "wall_ms": _ms(wall),
            "shares_pct": shares, "breakdown_ms": {c: _ms(v) for c, v in sorted(cats.items(), key=lambda kv: -kv[1])},
            "gpu": gpu, "has_gpu": gpu is not None, "slowest": slowest_step(a)}


def run_verdict_of(t: LoadedTrace, settings: Settings) -> dict[str, Any]:
    """The run's verdict (``whatif.run_verdict``) of a loaded trace, as ``oracle analyze --json`` gives it."""
    return run_verdict(open_trace(t.trace_id, settings).analysis).to_json()


def slowest_step(a: Analysis) -> dict[str, Any] | None:
    """The run's slowest complete step on its slowest rank, against the median of that rank's other steps and the
    slow-step rule (``findings.slow_steps``): ``slow`` when it is abnormal, ``spread_pct`` the rank's step-to-step
    spread (one robust deviation, floored at the machine's noise) in % of that median; and every slow step."""
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps and r.step >= 0]
    compared = compare_steps(complete)
    if not compared:
        return None
    top, slow = max(compared, key=lambda x: (x[0].wall_ns, -x[0].rank))
    walls = np.array([r.wall_ns for r in complete if r.rank == top.rank and r.step != top.step], dtype=np.float64)
    med = float(top.median_ns)
    sigma = max(float(np.median(np.abs(walls - med))) * 1.4826, NOISE_FLOOR * med)
    return {"step": top.step, "rank": top.rank, "wall_ms": _ms(top.wall_ns / 1e6), "median_ms": _ms(med / 1e6),
            "excess_pct": round(100 * (top.wall_ns - med) / med, 1) if med else 0.0,
            "spread_pct": round(100 * sigma / med, 1) if med else 0.0, "slow": slow,
            "ratio_rule": SLOW_RATIO, "mads_rule": SLOW_MADS,
            "slow_steps": [{"step": s.step, "rank": s.rank, "wall_ms": _ms(s.wall_ns / 1e6),
                            "median_ms": _ms(s.median_ns / 1e6), "ratio": round(s.wall_ns / s.median_ns, 2)}
                           for s in sorted((s for s, is_slow in compared if is_slow), key=lambda s: -s.excess_ns)]}


def top_kernels(t: LoadedTrace, settings: Settings, step: int | None = None,
                k: int = step_questions.TOP_OPS) -> list[dict[str, Any]]:
    """The GPU kernels (every rank) taking most GPU time, of one step or of the whole trace: ``name`` the
    full name, ``short_name`` the readable one (``graph.readable_kernel_name``)."""
    g = open_trace(t.trace_id, settings).analysis.graph
    mask = g.kind == NodeKind.KERNEL
    if step is not None:
        mask &= g.step == step
    totals: dict[str, list[int]] = {}
    for node in np.flatnonzero(mask):
        total = totals.setdefault(g.node_name(int(node)), [0, 0])
        total[0] += 1
        total[1] += int(g.dur_ns[node])
    top = sorted(totals.items(), key=lambda kv: -kv[1][1])[:k]
    return [{"name": name, "short_name": readable_kernel_name(name), "count": n, "dur_ms": _ms(ns / 1e6)}
            for name, (n, ns) in top]


def top_ops(store: GraphStore, t: LoadedTrace, step: int | None = None, k: int = step_questions.TOP_OPS,
            settings: Settings | None = None) -> dict[str, Any]:
    """The ops carrying most critical-path time: of one step (its explained rank), or summed over
    every complete (step, rank) of the run when no step is named; with ``settings``, also the GPU
    kernels taking most GPU time (``kernels``, see ``top_kernels``)."""
    kernels = {"kernels": top_kernels(t, settings, step, k)} if settings is not None else {}
    if step is not None:
        step, rank = step_questions.pick_step(store, t, step)
        ops = step_questions._top_ops(store, t, step, rank, k)  # noqa: SLF001
        return {"trace": t.name, "step": step, "rank": rank, "ops": ops} | kernels
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    rows = [r for r in step_questions.step_rows(store, t) if not r["partial"]]
    for r in rows:
        for op in step_questions._top_ops(store, t, r["step"], r["rank"], k):
            g = totals.setdefault((op["op"], op["kind"]), {"op": op["op"], "kind": op["kind"], "count": 0,
                                                           "critical_ms": 0.0, "dur_ms": 0.0})
            g["count"] += op["count"]
            g["critical_ms"] += op["critical_ms"]
            g["dur_ms"] += op["dur_ms"]
    top = sorted(totals.values(), key=lambda g: -g["critical_ms"])[:k]
    return {"trace": t.name, "step": None, "steps": len({r["step"] for r in rows}),
            "ops": [g | {"critical_ms": _ms(g["critical_ms"]), "dur_ms": _ms(g["dur_ms"])} for g in top]} | kernels


def rank_like_peers(store: GraphStore, t: LoadedTrace, settings: Settings, step: int | None,
                    rank: int) -> dict[str, Any]:
    """What ``step`` would take if ``rank`` behaved like the other ranks. The edit language has no
    edit that replaces a rank's step by its peers', so this is composed: every finding of that rank in
    that step fixed (``fix CATEGORY rank=R``), predicted together by the replay.

    Raises:
        NotFoundError: a step or rank the trace lacks, or a rank with no finding in the step.
    """
    step, rank = step_questions.pick_step(store, t, step, rank)
    found = step_questions.explain_step(store, t, step, rank)["findings"]
    cats = list(dict.fromkeys(f["category"] for f in found if rank in f["ranks"] and f["step"] in (step, None)))
    rows = [r for r in step_questions.step_rows(store, t) if r["step"] == step and not r["partial"]]
    own = next(r["wall_ms"] for r in rows if r["rank"] == rank)
    peers = sorted(r["wall_ms"] for r in rows if r["rank"] != rank)
    if not cats:
        raise NotFoundError(f"rank {rank}: no finding on it in step {step} of trace {t.name}; it behaves like "
                            f"the other ranks as far as the analysis sees ({own} ms, others {peers} ms)")
    edits = [f"fix {c} step={step} rank={rank}" for c in cats]
    p = whatif_trace(t.trace_id, edits, settings, step=step, model=False)
    return {"trace": t.name, "step": step, "rank": rank, "edits": [format_edit(e) for e in p.edits],
            "rank_ms": own, "peers_ms": peers, "baseline_ms": p.baseline_ms, "best_ms": p.best_ms,
            "gain_ms": p.gain_ms, "chosen": p.chosen,
            "composed": f"the fixes of rank {rank}'s findings in step {step} ({', '.join(cats)})"}


def whatif_run(t: LoadedTrace, edit: str, settings: Settings) -> dict[str, Any]:
    """What ``edit`` saves over every complete step of the run, not one: the replay's prediction per
    step, summed (``partial`` steps are left out, as the analysis leaves them)."""
    parsed = parse_edit(edit)  # a bad edit fails before any reading
    a = open_trace(t.trace_id, settings).analysis
    per_step, untouched = [], []
    for s in sorted({r.step for r in a.steps if r.step >= 0 and (r.step, r.rank) not in a.partial_steps}):
        try:
            p = predict_whatif(a, s, [parsed], None)
        except ConfigError:  # a fix of a finding this step does not have: the step keeps its time
            untouched.append(s)
            base = baseline_ms(a, s)
            per_step.append({"step": s, "baseline_ms": base, "best_ms": base, "gain_ms": 0.0})
            continue
        per_step.append({"step": s, "baseline_ms": p.baseline_ms, "best_ms": p.best_ms, "gain_ms": p.gain_ms})
    base, best = sum(p["baseline_ms"] for p in per_step), sum(p["best_ms"] for p in per_step)
    return {"trace": t.name, "edit": format_edit(parsed), "steps": len(per_step), "baseline_ms": _ms(base),
            "best_ms": _ms(best), "gain_ms": _ms(base - best),
            "gain_pct": round(100 * (base - best) / base, 1) if base else 0.0,
            "per_step": sorted(per_step, key=lambda p: -p["gain_ms"])[:5], "untouched_steps": untouched}
