"""The offline planner's answers to the questions that describe a trace (which rank straggles, the
critical path, two steps or runs compared, the GPU's time, the steps, the traces, a Cypher query), in
the answer contract: a verdict with its number, then evidence lines from the tool that gave them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bottleneck_oracle.agent.answer_text import moved, result_of, signed, template
from bottleneck_oracle.agent.answers_runs import compare_runs_reply
from bottleneck_oracle.agent.planner import Result
from bottleneck_oracle.agent.reply import Evidence, Reply

__all__ = ["describe"]


def _stragglers(s: dict[str, Any]) -> Reply:
    if not s["collectives"]:
        return Reply(template("no_collectives", step=s["step"]))
    found = s.get("findings", [])
    if not found:
        last = s["collectives"][0]
        return Reply(template("no_straggler", step=s["step"], rank=last["last_rank"], late_ms=last["late_ms"]))
    f = found[0]
    rank = f["ranks"][0]
    mine = next((r for r in s["by_rank"] if r["rank"] == rank), None)
    first = next((c for c in s["collectives"] if c["last_rank"] == rank), None)
    verdict = (template("straggler", rank=rank, step=s["step"], count=mine["last_in"], late_ms=mine["max_late_ms"],
                        op=f"'{first['op']}'") if mine and first else template("straggler_short", rank=rank,
                                                                                   step=s["step"]))
    return Reply(verdict, [Evidence(template("straggler_evidence", evidence=f["evidence"].rstrip(".")), "stragglers")])


def _critical(c: dict[str, Any]) -> Reply:
    path = c["path"]
    evidence = [Evidence(template("critical_class", op_class=p["op_class"], ms=p["ms"], ops=", ".join(
        f"'{o['name']}' {o['ms']} ms" for o in p["ops"][:2]) or "no op"), "critical_subgraph") for p in path[:3]]
    shown = [(k, v) for k, v in c["attribution"].items() if v["ms"] >= 0.001 or (v["median_ms"] or 0) >= 0.001]
    if shown:
        evidence.append(Evidence(template("critical_attribution", attribution="; ".join(
            f"{k} {v['ms']} ms" + (f" (median step {v['median_ms']} ms)" if v["median_ms"] is not None else "")
            for k, v in shown)), "critical_subgraph"))
    late = [x for x in c["collectives"] if x["late_ms"] >= 0.001][:3]
    if late:
        evidence.append(Evidence(template("critical_collectives", collectives="; ".join(
            f"{x['kind']} #{x['instance']}: rank {x['last_rank']} last by {x['late_ms']} ms" for x in late)),
            "critical_subgraph"))
    top = path[0] if path else {"op_class": "no op", "ms": 0.0}
    return Reply(template("critical_path", step=c["step"], rank=c["rank"], wall_ms=c["wall_ms"],
                          top_class=top["op_class"], top_ms=top["ms"]), evidence)


def _compare_steps(c: dict[str, Any]) -> Reply:
    ops = "; ".join(f"'{o['op']}' {signed(o['delta_ms'])}" for o in c["ops"][:4]) or "none"
    return Reply(template("compare_steps", **c), [
        Evidence(template("compare_steps_moved", moved=moved(c["breakdown_delta_ms"])), "compare_steps"),
        Evidence(template("compare_steps_ops", ops=ops), "compare_steps")])


def _compare_ranks(c: dict[str, Any]) -> Reply:
    evidence = [Evidence(template("compare_ranks_moved", moved=moved(c["breakdown_delta_ms"]), **c), "compare_ranks")]
    if c["gpu_a"] and c["gpu_b"]:
        evidence.append(Evidence(template("compare_ranks_gpu", busy_a=c["gpu_a"]["busy_pct"],
                                          busy_b=c["gpu_b"]["busy_pct"], **c), "compare_ranks"))
    for rank, found in ((c["rank_b"], c["findings_b"]), (c["rank_a"], c["findings_a"])):
        if found:
            named = "; ".join(f"{f['category']} ({f['impact_ms']} ms"
                              f"{', the cause of the step' if f['is_cause'] else ''})" for f in found[:3])
            evidence.append(Evidence(template("compare_ranks_findings", rank=rank, findings=named), "compare_ranks"))
    cause = c["cause"]
    if cause and cause["is_cause"] and not {c["rank_a"], c["rank_b"]} & set(cause["ranks"]):
        evidence.append(Evidence(template("compare_ranks_cause", category=cause["category"], rank=cause["rank"],
                                          step=c["step"]), "compare_ranks"))
    return Reply(template("compare_ranks", **c), evidence)


def _gpu_busy(e: dict[str, Any]) -> Reply:
    """What the GPU did in the step explained, or that the trace cannot say."""
    gpu = e.get("gpu")
    if gpu is None:
        return Reply(template("gpu_none_rank", rank=e["rank"]) if e.get("has_gpu") else template("gpu_none"))
    values = gpu | {"step": e["step"], "rank": e["rank"], "wall_ms": e["wall_ms"]}
    evidence = [Evidence(template("gpu_split", **values), "explain_step")]
    b = e.get("gpu_bound")
    if b:
        classes = ", ".join(f"{c['class']} {c['ms']} ms" for c in b["op_classes"][:3]) or "none"
        evidence += [Evidence(template("gpu_bound", **values | b), "explain_step"),
                     Evidence(template("gpu_classes", classes=classes), "explain_step")]
    elif e.get("untraced_wait"):
        evidence.append(Evidence(template("gpu_untraced", **e["untraced_wait"]), "explain_step"))
    else:
        evidence.append(Evidence(template("gpu_not_bound", idle_ms=gpu["idle_ms"]), "explain_step"))
    return Reply(template("gpu_busy", **values), evidence)


def _steps(s: dict[str, Any]) -> Reply:
    slow = s["slow_steps"]
    evidence = [Evidence(template("steps_one", **x), "list_steps") for x in slow]
    bound = "; ".join(f"step {b['step']} on rank {b['rank']} ({b['busy_pct']}% busy)"
                      for b in s.get("gpu_bound_steps", []))
    if bound:
        evidence.append(Evidence(template("steps_gpu_bound", bound=bound), "list_steps"))
    waits = "; ".join(f"step {u['step']} on rank {u['rank']} {u['ms']} ms ({u['pct']}%)"
                      for u in s.get("untraced_steps", []))
    if waits:
        evidence.append(Evidence(template("steps_untraced", steps=waits), "list_steps"))
    which = (template("steps_slow", steps=", ".join(dict.fromkeys(str(x["step"]) for x in slow))) if slow
             else template("steps_none_slow"))
    return Reply(template("steps", trace=s["trace"], n=len(s["steps"]), median_step_ms=s["median_step_ms"],
                          slow=which), evidence)


def _traces(t: dict[str, Any]) -> Reply:
    return Reply(template("traces", traces="; ".join(f"{x['name']} ({x['trace_id']}, {x['ranks']} ranks)"
                                                     for x in t["traces"]) or "none"))


def _cypher(c: dict[str, Any]) -> Reply:
    rows = [Evidence(template("cypher_row", row=", ".join(f"{k}={v}" for k, v in row.items())), "cypher")
            for row in c["rows"][:10]]
    return Reply(template("cypher", count=c["count"]), rows)


HANDLERS: dict[str, tuple[str, Callable[[dict[str, Any]], Reply]]] = {
    "straggler": ("stragglers", _stragglers), "critical_path": ("critical_subgraph", _critical),
    "compare_steps": ("compare_steps", _compare_steps), "compare_runs": ("compare_runs", compare_runs_reply),
    "compare_ranks": ("compare_ranks", _compare_ranks),
    "gpu_busy": ("explain_step", _gpu_busy), "list_steps": ("list_steps", _steps),
    "list_traces": ("list_traces", _traces), "cypher": ("cypher", _cypher),
}


def describe(intent: str, results: list[Result]) -> Reply | None:
    """The answer of a describing intent from its tool's result; None when that tool gave none."""
    if intent == "compare_ranks" and result_of(results, "compare_ranks") is None:
        return Reply(template("no_ranks"))
    if intent == "compare_runs" and result_of(results, "compare_runs") is None:
        traces = result_of(results, "list_traces") or {"traces": []}
        # the traces by name, not a count: a count is a number no tool returned
        names = ", ".join(f"'{t['name']}'" for t in traces["traces"]) or "none"
        return Reply(template("one_run", traces=names))
    name, handler = HANDLERS.get(intent, ("", None))  # type: ignore[assignment]
    data = result_of(results, name) if handler else None
    return handler(data) if data is not None and handler else None
