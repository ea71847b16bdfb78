"""The offline planner's answers: the templates of ``prompts/answers.yaml`` filled with the values the
tools returned, as they returned them, so every number in an answer is one a tool gave."""

from __future__ import annotations

from typing import Any

from bottleneck_oracle.agent.intents import Slots
from bottleneck_oracle.agent.planner import Result, edit_for
from bottleneck_oracle.prompts import load_yaml

__all__ = ["missing_tools", "remedies_first", "write_answer"]


def _t(name: str, **values: Any) -> str:
    return " ".join(str(load_yaml("answers")[name]).split()).format(**values)


def _get(results: list[Result], name: str) -> dict[str, Any] | None:
    return next((r.data for r in results if r.name == name), None)


def _signed(ms: float) -> str:
    return f"+{ms} ms" if ms > 0 else f"{ms} ms"


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks)) or "all"


def _gpu_bound(e: dict[str, Any]) -> list[str]:
    """The GPU-bound verdict of an ``explain_step`` result, as a sentence (none when not bound)."""
    b = e.get("gpu_bound")
    if not b:
        return []
    classes = ", ".join(f"{c['class']} {c['ms']} ms" for c in b["op_classes"][:3]) or "none"
    return [_t("gpu_bound", step=e["step"], rank=e["rank"], wall_ms=e["wall_ms"], busy_pct=b["busy_pct"],
               busy_ms=b["busy_ms"], classes=classes)]


def _gpu_busy(e: dict[str, Any]) -> list[str]:
    """What the GPU did in the step explained, or that the trace cannot say."""
    gpu = e.get("gpu")
    if gpu is None:
        return [_t("gpu_none_rank", rank=e["rank"])] if e.get("has_gpu") else [_t("gpu_none")]
    out = [_t("gpu_busy", **gpu | {"step": e["step"], "rank": e["rank"], "wall_ms": e["wall_ms"]})]
    return out + (_gpu_bound(e) or [_t("gpu_not_bound", idle_ms=gpu["idle_ms"])])


def _why_slow(results: list[Result], intent: str) -> list[str]:
    e = _get(results, "explain_step")
    assert e is not None
    cause = e.get("cause")
    if cause is None and e.get("gpu_bound"):  # no host-side cause: the GPU's own time is the step's
        return _gpu_bound(e)
    if cause is None:
        if e.get("median_ms") is None:
            return [f"Step {e['step']} takes {e['wall_ms']} ms on rank {e['rank']}; no finding explains it as slow."]
        which = "not_slow" if intent == "explain" else "none_slow"
        return [_t(which, **e)]
    ops = ", ".join(f"'{op}'" for op in cause["ops"]) or "(none named)"
    values = dict(e) | {"category": cause["category"], "ranks": _ranks(cause["ranks"]), "ops": ops,
                        "evidence": cause["evidence"].rstrip(".")}
    out = [_t("slow" if e.get("median_ms") is not None else "slow_no_median", **values), *_gpu_bound(e)]
    moved = [f"{c} {_signed(ms)}" for c, ms in (e.get("delta_ms") or {}).items() if abs(ms) >= 0.001][:3]
    if moved:
        out.append(_t("moved", moved="; ".join(moved)))
    others = [f"{f['category']} on rank(s) {_ranks(f['ranks'])} ({f['impact_ms']} ms)" for f in e["findings"]
              if f is not cause and f != cause and f["severity"] == "major" and f["step"] == e["step"]]
    if others:
        out.append(_t("also", others="; ".join(others)))
    w = _get(results, "whatif")
    if w and "error" not in w:
        out.append(_t("fix", edit=w["edits"][0], step=w["step"], best_ms=w["best_ms"], baseline_ms=w["baseline_ms"],
                      gain_ms=w["gain_ms"], chosen=w["chosen"]))
    entries = remedies_first(_get(results, "playbook_search"), cause["category"])
    if entries:
        out.append(_t("remedy", remedies="; ".join(f"{r['title']}: {r['remedy'].rstrip('.')}" for r in entries)))
    return out


def remedies_first(found: dict[str, Any] | None, category: str | None, k: int = 2) -> list[dict[str, Any]]:
    """Playbook entries of the cause's category first, then the nearest others."""
    entries = (found or {}).get("entries", [])
    return sorted(entries, key=lambda r: r.get("category") != category)[:k]


def _stragglers(s: dict[str, Any]) -> list[str]:
    if not s["collectives"]:
        return [_t("no_collectives", step=s["step"])]
    found = [f for f in s.get("findings", []) if f["category"] == "straggler_rank"]
    if not found:
        last = s["collectives"][0]
        return [_t("no_straggler", step=s["step"], rank=last["last_rank"], late_ms=last["late_ms"])]
    f = found[0]
    rank = f["ranks"][0]
    out = [_t("straggler", rank=rank, step=s["step"], evidence=f["evidence"].rstrip("."))]
    mine = next((r for r in s["by_rank"] if r["rank"] == rank), None)
    first = next((c for c in s["collectives"] if c["last_rank"] == rank), None)
    if mine and first:
        out.append(_t("straggler_arrivals", count=mine["last_in"], late_ms=mine["max_late_ms"], op=f"'{first['op']}'"))
    return out


def _items(values: dict[str, float], limit: int = 3) -> str:
    shown = [f"{k} {_signed(v)}" for k, v in values.items() if abs(v) >= 0.001][:limit]
    return "; ".join(shown) or "nothing"


def _critical(c: dict[str, Any]) -> list[str]:
    classes = "; ".join(f"{p['op_class']} {p['ms']} ms (" + ", ".join(f"'{o['name']}' {o['ms']} ms"
                                                                    for o in p["ops"][:2]) + ")"
                        for p in c["path"][:5]) or "no op"
    moved = [(k, v) for k, v in c["attribution"].items() if v["ms"] >= 0.001 or (v["median_ms"] or 0) >= 0.001]
    attribution = "; ".join(f"{k} {v['ms']} ms" + (f" (median step {v['median_ms']} ms)" if v["median_ms"] is not None
                                                   else "") for k, v in moved)
    out = [_t("critical_path", step=c["step"], rank=c["rank"], wall_ms=c["wall_ms"], classes=classes,
              attribution=attribution or "nothing")]
    late = [x for x in c["collectives"] if x["late_ms"] >= 0.001][:3]
    if late:
        out.append(_t("critical_collectives", collectives="; ".join(
            f"{x['kind']} #{x['instance']}: rank {x['last_rank']} last by {x['late_ms']} ms" for x in late)))
    return out


def _compare_steps(c: dict[str, Any]) -> list[str]:
    ops = "; ".join(f"'{o['op']}' {_signed(o['delta_ms'])}" for o in c["ops"][:4]) or "none"
    return [_t("compare_steps", **c | {"moved": _items(c["breakdown_delta_ms"]), "ops": ops})]


def _compare_runs(c: dict[str, Any]) -> list[str]:
    return [_t("compare_runs", **c | {"moved": _items(c["category_delta_ms"]),
                                      "classes": _items(c["op_class_delta_ms"])})]


def _whatif(w: dict[str, Any]) -> list[str]:
    predictors = ", ".join(f"{k} {v} ms" for k, v in w["predicted_ms"].items())
    out = [_t("whatif", edit="; ".join(w["edits"]), step=w["step"], best_ms=w["best_ms"],
              baseline_ms=w["baseline_ms"], gain_ms=w["gain_ms"], chosen=w["chosen"], why=w["why"],
              predictors=predictors)]
    moved = w.get("moved") or {}
    parts = [f"'{x['op']}' {_signed(x['delta_ms'])}" for x in moved.get("changed", [])[:3]]
    if parts:
        out.append(_t("whatif_moved", moved="; ".join(parts)))
    return out


def _optimize(o: dict[str, Any]) -> list[str]:
    plan = o["plan"]
    if not plan:
        return [_t("optimize_none", step=o["step"], baseline_ms=o["baseline_ms"])]
    first = plan[0]
    out = [_t("optimize_first", **first | {"step": o["step"], "baseline_ms": o["baseline_ms"]})]
    if len(plan) > 1:
        out.append(_t("optimize_then", rest="; ".join(
            f"`{p['edit']}` to {p['predicted_ms']} ms ({p['gain_ms']} ms more saved)" for p in plan[1:])))
    remedies = next((c["remedies"] for c in o["candidates"] if c["edit"] == first["edit"] and c["remedies"]), [])
    if remedies:
        out.append(_t("optimize_remedies", remedies="; ".join(remedies[:3])))
    others = [c for c in o["candidates"] if c["edit"] != first["edit"] and (c["gain_ms"] or 0) > 0][:3]
    if others:
        out.append(_t("optimize_others", others="; ".join(
            f"`{c['edit']}` ({c['category']}) {c['gain_ms']} ms ({c['predictor']})" for c in others)))
    return out


def _seen(results: list[Result]) -> list[str]:
    e, s, p = _get(results, "explain_step"), _get(results, "similar_findings"), _get(results, "playbook_search")
    cause = (e or {}).get("cause") or {}
    itself = ((e or {}).get("trace"), (e or {}).get("step"), cause.get("category"))
    found = [f for f in (s or {}).get("findings", [])
             if (f.get("trace_name"), f.get("step"), f.get("category")) != itself]
    out = []
    if found:
        similar = "; ".join(f"trace {f.get('trace_name') or f.get('trace')} step {f.get('step')} {f.get('category')} "
                            f"(similarity {f.get('similarity')})" for f in found[:5])
        out.append(_t("seen", step=(e or {}).get("step"), category=cause.get("category", "no finding"),
                      similar=similar))
    else:
        out.append(_t("seen_none"))
    entries = remedies_first(p, cause.get("category"))
    if entries:
        out.append(_t("seen_fix", remedies="; ".join(f"{r['title']}: {r['remedy'].rstrip('.')}" for r in entries)))
    return out


def _steps(s: dict[str, Any]) -> list[str]:
    slow = "; ".join(f"step {x['step']} on rank {x['rank']} ({x['wall_ms']} ms, median {x['median_ms']} ms)"
                     for x in s["slow_steps"])
    out = [_t("steps", trace=s["trace"], n=len(s["steps"]), median_step_ms=s["median_step_ms"],
              slow=_t("steps_slow", slow=slow) if slow else _t("steps_none_slow"))]
    bound = "; ".join(f"step {b['step']} on rank {b['rank']} ({b['busy_pct']}% busy)"
                      for b in s.get("gpu_bound_steps", []))
    return out + ([_t("steps_gpu_bound", bound=bound)] if bound else [])


def _cypher(c: dict[str, Any]) -> list[str]:
    rows = "; ".join(", ".join(f"{k}={v}" for k, v in row.items()) for row in c["rows"][:10])
    return [_t("cypher", count=c["count"], rows=rows or "none")]


def missing_tools(names: list[str]) -> str:
    """The answer when the plan needs tools the caller did not offer."""
    return _t("missing_tools", tools=", ".join(names))


def write_answer(intent: str, slots: Slots, results: list[Result]) -> str:
    """The answer to a question of ``intent`` from this turn's tool results."""
    errors = [r.data["error"] for r in results if not r.ok]
    if errors:
        body = [_t("error", error=errors[0])]
    elif intent == "out_of_scope":
        body = [_t("out_of_scope")]
    elif intent == "whatif" and edit_for(slots) is None:
        body = [_t("no_trace_change")]
    elif intent == "compare_runs" and _get(results, "compare_runs") is None:
        traces = _get(results, "list_traces") or {"traces": []}
        body = [_t("one_run", n=len(traces["traces"]))]
    else:
        body = _body(intent, slots, results)
    return " ".join(body + [_t("footer", intent=intent)])


def _body(intent: str, slots: Slots, results: list[Result]) -> list[str]:
    if intent == "why_slow":
        return _why_slow(results, "explain" if slots.step is not None else "any")
    if intent == "compare_steps":
        c = _get(results, "compare_steps")
        return _compare_steps(c) if c else _why_slow(results, "explain")
    handlers = {"straggler": ("stragglers", _stragglers), "critical_path": ("critical_subgraph", _critical),
                "compare_runs": ("compare_runs", _compare_runs), "whatif": ("whatif", _whatif),
                "optimize": ("optimize", _optimize), "list_steps": ("list_steps", _steps),
                "cypher": ("cypher", _cypher)}
    if intent in handlers:
        name, fn = handlers[intent]
        data = _get(results, name)
        return fn(data) if data else [_t("out_of_scope")]
    if intent == "seen_before":
        return _seen(results)
    if intent == "gpu_busy":
        e = _get(results, "explain_step")
        return _gpu_busy(e) if e else [_t("out_of_scope")]
    if intent == "list_traces":
        t = _get(results, "list_traces") or {"traces": []}
        return [_t("traces", traces="; ".join(f"{x['name']} ({x['trace_id']}, {x['ranks']} ranks)"
                                              for x in t["traces"]) or "none")]
    return [_t("out_of_scope")]
