"""Questions about the steps of a loaded trace, answered from the graph database: the steps and which
are slow, one step explained against the median step, two steps compared (two runs: diff.py), the
stragglers of each collective. Every result is JSON-ready, times in ms rounded to 3 decimals, so
the agent's tools, the CLI and the HTTP API show the same numbers.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.findings.finding import rank_ranges, untraced_matters
from bottleneck_oracle.graph.types import CATEGORIES
from bottleneck_oracle.graphdb import GraphStore
from bottleneck_oracle.graphdb.tables import GPU_FIELDS
from bottleneck_oracle.workspace.loaded import LoadedTrace

__all__ = ["compare_ranks", "compare_steps", "explain_step", "list_steps", "pick_step", "step_rows", "stragglers"]

TOP_OPS = 8
_CATS = tuple(c.value for c in CATEGORIES)


def _ms(value: Any) -> float:
    return round(float(value or 0.0), 3)


def _rows(store: GraphStore, t: LoadedTrace) -> list[dict[str, Any]]:
    return [dict(r) for r in store.read("trace_steps", {"trace": t.trace_id})]


def _breakdown(row: dict[str, Any]) -> dict[str, float]:
    return {c: _ms(row[f"{c}_ms"]) for c in _CATS}


def _untraced(row: dict[str, Any]) -> dict[str, Any] | None:
    """The step's GPU wait for what the trace does not show (``findings/finding.py``), where an answer must
    say so: ``{step, rank, ms, pct}`` (pct of the wall time); else None."""
    wait, wall = float(row.get("untraced_wait_ms") or 0.0), float(row["wall_ms"])
    if not untraced_matters(wait * 1e6, wall * 1e6):
        return None
    return {"step": row["step"], "rank": row["rank"], "ms": _ms(wait), "pct": round(100 * wait / wall, 1)}


def _gpu(row: dict[str, Any]) -> dict[str, float] | None:
    """What the GPU did in the step's window (``graph/gpu_timeline.py``), or None: its rank recorded no GPU work."""
    if row.get("gpu_busy_ms") is None:
        return None
    return {f: _ms(row[f"gpu_{f}"]) for f in GPU_FIELDS} | {"busy_pct": float(row["gpu_busy_pct"])}


def _gpu_bound(row: dict[str, Any]) -> dict[str, Any] | None:
    """The step's GPU-bound verdict: how busy, GPU time by op class, the analysis's evidence; None if not bound."""
    if not row.get("gpu_bound"):
        return None
    classes = [{"class": c, "ms": _ms(t)} for c, t in zip(row["gpu_op_classes"] or [], row["gpu_op_classes_ms"] or [])]
    return {"busy_pct": float(row["gpu_busy_pct"]), "busy_ms": _ms(row["gpu_busy_ms"]), "op_classes": classes,
            "evidence": row["gpu_evidence"]}


def _complete_steps(rows: list[dict[str, Any]]) -> list[int]:
    return sorted({r["step"] for r in rows if not r["partial"]})


def _median_of(rows: list[dict[str, Any]], rank: int, step: int) -> dict[str, Any] | None:
    """The median of the rank's other complete steps: wall time and each category, or None below two."""
    others = [r for r in rows if r["rank"] == rank and r["step"] != step and not r["partial"]]
    if len(others) < 2:
        return None
    out = {"wall_ms": _ms(statistics.median(r["wall_ms"] for r in others)), "steps": len(others)}
    out["breakdown_ms"] = {c: _ms(statistics.median(r[f"{c}_ms"] for r in others)) for c in _CATS}
    return out


def pick_step(store: GraphStore, t: LoadedTrace, step: int | None, rank: int | None = None,
              rows: list[dict[str, Any]] | None = None) -> tuple[int, int]:
    """``(step, rank)``: the step asked (default: the slowest slow step, else the longest), on the rank
    asked (default: its slow rank with the largest excess, else its longest).

    Raises:
        NotFoundError: a step or rank the trace does not have (the message lists those it has).
    """
    rows = _rows(store, t) if rows is None else rows  # a caller that read the steps passes them
    steps = _complete_steps(rows)
    if not steps:
        raise ConfigError(f"trace {t.name}: no complete step")
    if step is None:
        slow = list(store.read("slow_steps", {"trace": t.trace_id}))
        longest = max((r for r in rows if not r["partial"]), key=lambda r: r["wall_ms"])
        step = slow[0]["step"] if slow else longest["step"]
    if step not in steps:
        raise NotFoundError(f"step {step}: trace {t.name} has no such complete step; its steps are "
                          f"{', '.join(map(str, steps))}")
    of_step = [r for r in rows if r["step"] == step and not r["partial"]]
    ranks = sorted(r["rank"] for r in of_step)
    if rank is not None:
        if rank not in ranks:
            raise NotFoundError(f"rank {rank}: step {step} of trace {t.name} has ranks {', '.join(map(str, ranks))}")
        return step, rank
    slow = [r for r in of_step if r["slow"]]
    chosen = max(slow or of_step, key=lambda r: (r["wall_ms"], -r["rank"]))
    return step, chosen["rank"]


def list_steps(store: GraphStore, t: LoadedTrace) -> dict[str, Any]:
    """Every step (its slowest rank's wall time against the median step, and what its GPU did), the slow
    (step, rank)s, the GPU-bound ones, and those whose GPU waited for what the trace does not show
    (``untraced_steps``); ``has_gpu`` is False for a trace with no GPU events."""
    rows = _rows(store, t)
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_step[r["step"]].append(r)
    walls = [max(r["wall_ms"] for r in rs) for s, rs in sorted(by_step.items()) if not any(r["partial"] for r in rs)]
    steps = []
    for s, rs in sorted(by_step.items()):
        top = max(rs, key=lambda r: (r["wall_ms"], -r["rank"]))
        steps.append({"step": s, "wall_ms": _ms(top["wall_ms"]), "slowest_rank": top["rank"],
                      "slow": any(r["slow"] for r in rs), "partial": any(r["partial"] for r in rs),
                      "gpu": _gpu(top), "gpu_bound": bool(top.get("gpu_bound"))})
    slow = [{"step": r["step"], "rank": r["rank"], "wall_ms": _ms(r["wall_ms"]), "median_ms": _ms(r["median_ms"]),
             "excess_ms": _ms(r["excess_ms"])} for r in store.read("slow_steps", {"trace": t.trace_id})]
    bound = [{"step": r["step"], "rank": r["rank"], "busy_pct": float(r["gpu_busy_pct"])}
             for r in rows if r.get("gpu_bound")]
    untraced = [u for r in rows if not r["partial"] and (u := _untraced(r)) is not None]
    return {"trace": t.name, "trace_id": t.trace_id, "ranks": len({r["rank"] for r in rows}),
            "median_step_ms": _ms(statistics.median(walls)) if walls else None, "steps": steps, "slow_steps": slow,
            "has_gpu": any(_gpu(r) is not None for r in rows), "gpu_bound_steps": bound, "untraced_steps": untraced}


def step_rows(store: GraphStore, t: LoadedTrace) -> list[dict[str, Any]]:
    """Every (step, rank), by step then rank: its wall time, whether it is slow or cut short, the
    median of the rank's other steps with the excess over it (None where the analysis has none), and
    what its GPU did (``gpu``, None on a rank without GPU work) and whether it is GPU-bound."""
    return [{"step": r["step"], "rank": r["rank"], "wall_ms": _ms(r["wall_ms"]), "slow": bool(r["slow"]),
             "partial": bool(r["partial"]), "median_ms": None if r["median_ms"] is None else _ms(r["median_ms"]),
             "excess_ms": None if r["excess_ms"] is None else _ms(r["excess_ms"]), "gpu": _gpu(r),
             "gpu_bound": bool(r.get("gpu_bound"))} for r in _rows(store, t)]


def _findings(store: GraphStore, t: LoadedTrace, step: int) -> list[dict[str, Any]]:
    return [{"category": f["category"], "step": f["step"], "ranks": list(f["ranks"] or []), "ops": list(f["ops"] or []),
             "impact_ms": _ms(f["impact_ms"]), "severity": f["severity"], "evidence": f["evidence"],
             "is_cause": bool(f.get("cause")),
             "waited": [{"rank": r, "ms": _ms(w)} for r, w in zip(f.get("waiting") or [], f.get("waited_ms") or [])]}
            for f in store.read("step_findings", {"trace": t.trace_id, "step": step})]


def _late_findings(findings: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    """The major findings of ``step`` that name a rank the others waited for: its cause when ranks waited
    for it (what made the rank late) first, then its ``straggler_rank`` findings, largest first."""
    major = [f for f in findings if f["step"] == step and f["severity"] == "major"]
    return ([f for f in major if f["is_cause"] and f["waited"]]
            + [f for f in major if f["category"] == "straggler_rank" and not (f["is_cause"] and f["waited"])])


def _cause(findings: list[dict[str, Any]], step: int) -> dict[str, Any] | None:
    """The step's cause (``findings/cause.py``: what delayed it, on the rank that did, with the ranks that
    waited and how long), else its first major finding (a chronic one when the step has none)."""
    major = [f for f in findings if f["severity"] == "major" and f["step"] in (step, None)]
    found = next((f for f in major if f["is_cause"] and f["step"] == step), major[0] if major else None)
    return None if found is None else found | {"rank": found["ranks"][0] if found["ranks"] else None}


def _step_range(row: dict[str, Any]) -> bool:
    """Whether an op row is a step's own ``ProfilerStep#N`` range."""
    return row["kind"] == "annotation" and row["name"].startswith("ProfilerStep#")


def _top_ops(store: GraphStore, t: LoadedTrace, step: int, rank: int, k: int = TOP_OPS) -> list[dict[str, Any]]:
    """The ops (by name) that carry most of the step's critical path; the step's own annotation, which
    spans the whole step, is left out (its gaps show as idle in the breakdown)."""
    rows = store.read("top_critical_ops", {"trace": t.trace_id, "step": step, "rank": rank, "k": 10 * k})
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        if _step_range(r):
            continue
        g = grouped.setdefault((r["name"], r["kind"]), {"op": r["name"], "kind": r["kind"], "ranks": set(),
                                                         "count": 0, "critical_us": 0.0, "dur_us": 0.0})
        g["ranks"].add(r["rank"])
        g["count"] += 1
        g["critical_us"] += r["contrib_us"]
        g["dur_us"] += r["dur_us"]
    top = sorted(grouped.values(), key=lambda g: -g["critical_us"])[:k]
    return [{"op": g["op"], "kind": g["kind"], "ranks": sorted(g["ranks"]), "count": g["count"],
             "critical_ms": _ms(g["critical_us"] / 1000), "dur_ms": _ms(g["dur_us"] / 1000)} for g in top]


def explain_step(store: GraphStore, t: LoadedTrace, step: int | None = None, rank: int | None = None) -> dict[str, Any]:
    """One step on one rank: its wall time and attribution against the rank's median step, what its GPU
    did (``gpu``; None on a rank without GPU work, ``has_gpu`` False for a trace without GPU events) and
    its GPU-bound verdict (``gpu_bound``, None when not), its GPU's wait for what the trace does not show
    (``untraced_wait``, None when small), the ops that carry its critical path, and the findings that
    explain it. ``cause``: the finding of what delayed the step (``findings/cause.py``), with
    ``rank`` (the rank that delayed it, the one explained when no rank is asked), ``waited`` (the ranks
    that waited for it, ``[{rank, ms}]``) and ``is_cause`` (False: no cause marked, its first major
    finding instead)."""
    rows = _rows(store, t)
    asked = rank
    step, rank = pick_step(store, t, step, rank, rows)
    findings = _findings(store, t, step)
    cause = _cause(findings, step)
    if asked is None and cause is not None and cause["is_cause"]:  # the rank that delayed the step
        rank = next((r["rank"] for r in rows if r["step"] == step and r["rank"] == cause["rank"]), rank)
    row = next(r for r in rows if r["step"] == step and r["rank"] == rank)
    median = _median_of(rows, rank, step)
    breakdown = _breakdown(row)
    out: dict[str, Any] = {"trace": t.name, "step": step, "rank": rank, "wall_ms": _ms(row["wall_ms"]),
                           "slow": bool(any(r["slow"] for r in rows if r["step"] == step)),
                           "slow_ranks": sorted(r["rank"] for r in rows if r["step"] == step and r["slow"]),
                           "breakdown_ms": breakdown, "gpu": _gpu(row), "gpu_bound": _gpu_bound(row),
                           "has_gpu": any(_gpu(r) is not None for r in rows), "untraced_wait": _untraced(row)}
    if median is not None:
        # the analysis's own median and excess (the findings cite them) where the step has them
        median_ms = _ms(row["median_ms"]) if row.get("median_ms") is not None else median["wall_ms"]
        excess = _ms(row["excess_ms"]) if row.get("excess_ms") is not None else _ms(row["wall_ms"] - median_ms)
        out |= {"median_ms": median_ms, "median_of_steps": median["steps"], "excess_ms": excess,
                "excess_pct": round(100 * excess / median_ms, 1) if median_ms else None,
                "median_breakdown_ms": median["breakdown_ms"],
                "delta_ms": dict(sorted(((c, _ms(breakdown[c] - median["breakdown_ms"][c])) for c in _CATS),
                                        key=lambda kv: -abs(kv[1])))}
    out["top_ops"] = _top_ops(store, t, step, rank)
    out["findings"] = findings
    # the cause of a slow step; a trace too short to have a median step can only be judged by its findings
    out["cause"] = cause if out["slow"] or median is None else None
    return out


def compare_ranks(store: GraphStore, t: LoadedTrace, rank_b: int, rank_a: int | None = None,
                  step: int | None = None) -> dict[str, Any]:
    """Rank ``rank_b`` against ``rank_a`` (default: the step's typical rank, its median wall time) in one
    step (default: the complete step where their critical paths differ most): wall time, each category
    of their critical paths, what each GPU did, and each rank's major findings of the step; ``cause``:
    the step's cause (``findings/cause.py``), which names the rank that delayed the step."""
    read = _rows(store, t)
    complete = {(r["step"], r["rank"]): r for r in read if not r["partial"]}
    ranks = sorted({r["rank"] for r in read})
    for asked in (rank_b, rank_a):
        if asked is not None and asked not in ranks:
            raise NotFoundError(f"rank {asked}: trace {t.name} has ranks {rank_ranges(ranks)}")

    def typical(s: int) -> int:  # of the other ranks
        walls = sorted((r["wall_ms"], k[1]) for k, r in complete.items() if k[0] == s and k[1] != rank_b)
        return walls[(len(walls) - 1) // 2][1] if walls else rank_b

    def apart(s: int) -> float:
        other = rank_a if rank_a is not None else typical(s)
        if (s, rank_b) not in complete or (s, other) not in complete:
            return -1.0
        a, b = _breakdown(complete[(s, other)]), _breakdown(complete[(s, rank_b)])
        return sum(abs(b[c] - a[c]) for c in _CATS)

    if step is None and complete:
        step = max(sorted({k[0] for k in complete}), key=apart)
    step, rank_b = pick_step(store, t, step, rank_b, read)
    step, rank_a = pick_step(store, t, step, typical(step) if rank_a is None else rank_a, read)
    rows = {(r["step"], r["rank"]): r for r in read}
    a, b = rows[(step, rank_a)], rows[(step, rank_b)]
    ba, bb = _breakdown(a), _breakdown(b)
    findings = [f for f in _findings(store, t, step) if f["severity"] == "major" and f["step"] == step]
    return {"trace": t.name, "step": step, "rank_a": rank_a, "rank_b": rank_b, "wall_a_ms": _ms(a["wall_ms"]),
            "wall_b_ms": _ms(b["wall_ms"]), "delta_ms": _ms(b["wall_ms"] - a["wall_ms"]),
            "breakdown_delta_ms": dict(sorted(((c, _ms(bb[c] - ba[c])) for c in _CATS), key=lambda kv: -abs(kv[1]))),
            "gpu_a": _gpu(a), "gpu_b": _gpu(b), "cause": _cause(findings, step),
            "findings_a": [f for f in findings if rank_a in f["ranks"]],
            "findings_b": [f for f in findings if rank_b in f["ranks"]]}


def compare_steps(store: GraphStore, t: LoadedTrace, step_a: int, step_b: int,
                  rank: int | None = None) -> dict[str, Any]:
    """Step ``step_b`` against ``step_a`` on one rank (default: ``step_b``'s slowest): wall time, each
    category, and the op classes whose time changed most (b - a)."""
    read = _rows(store, t)
    step_b, rank = pick_step(store, t, step_b, rank, read)
    step_a, _ = pick_step(store, t, step_a, rank, read)
    rows = {(r["step"], r["rank"]): r for r in read}
    a, b = rows[(step_a, rank)], rows[(step_b, rank)]
    ba, bb = _breakdown(a), _breakdown(b)
    ops = [r for r in store.read("compare_steps", {"trace": t.trace_id, "rank": rank, "step_a": step_a,
                                                   "step_b": step_b, "k": TOP_OPS + 2})
           if not _step_range(r)][:TOP_OPS]  # each step's own range is named for its step: not an op that moved
    return {"trace": t.name, "rank": rank, "step_a": step_a, "step_b": step_b, "wall_a_ms": _ms(a["wall_ms"]),
            "wall_b_ms": _ms(b["wall_ms"]), "delta_ms": _ms(b["wall_ms"] - a["wall_ms"]),
            "breakdown_delta_ms": dict(sorted(((c, _ms(bb[c] - ba[c])) for c in _CATS), key=lambda kv: -abs(kv[1]))),
            "ops": [{"op": r["name"], "kind": r["kind"], "count_a": r["count_a"], "count_b": r["count_b"],
                     "dur_a_ms": _ms(r["dur_a_us"] / 1000), "dur_b_ms": _ms(r["dur_b_us"] / 1000),
                     "delta_ms": _ms(r["delta_us"] / 1000), "critical_a_ms": _ms(r["contrib_a_us"] / 1000),
                     "critical_b_ms": _ms(r["contrib_b_us"] / 1000)} for r in ops]}


def stragglers(store: GraphStore, t: LoadedTrace, step: int | None = None) -> dict[str, Any]:
    """Per collective of a step, the rank that arrived last and by how much against the others' median
    arrival; per rank, how often it was last; and the late ranks the analysis found (a rank is one only
    when a finding says the others waited for it: a ``straggler_rank`` finding, or the step's cause
    with the ranks that waited; some rank is always last, by a little). The step defaults to the slow
    step with the longest such wait, else the slowest."""
    if step is None:
        late = [(f["impact_ms"], s) for s in dict.fromkeys(r["step"] for r in store.read(
            "slow_steps", {"trace": t.trace_id})) for f in _late_findings(_findings(store, t, s), s)]
        step = max(late)[1] if late else None
    step, _ = pick_step(store, t, step)
    rows = store.read("collective_stragglers", {"trace": t.trace_id, "step": step})
    collectives = [{"collective": r["instance"], "kind": r["kind"], "last_rank": r["slowest_rank"], "op": r["op"],
                    "late_ms": _ms(r["lateness_us"] / 1000), "members": r["members"]} for r in rows]
    per_rank: dict[int, list[float]] = defaultdict(list)
    for c in collectives:
        per_rank[c["last_rank"]].append(c["late_ms"])
    ranks = sorted(({"rank": k, "last_in": len(v), "max_late_ms": max(v), "total_late_ms": _ms(sum(v))}
                    for k, v in per_rank.items()), key=lambda r: -r["total_late_ms"])
    found = _late_findings(_findings(store, t, step), step)
    return {"trace": t.name, "step": step, "collectives": collectives, "by_rank": ranks, "findings": found,
            "straggler": found[0]["ranks"][0] if found and found[0]["ranks"] else None}

