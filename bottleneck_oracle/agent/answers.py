"""The offline planner's answers, in the answer contract (``agent/reply.py``): the templates of
``prompts/answers.yaml`` filled with the values the tools returned, as they returned them, so every
number in an answer is one a tool gave. This module answers why a step is slow and what to change (and why a job
hangs); ``answers_describe.py`` the questions that describe a trace, ``answers_stragglers.py`` those about a
pipeline job's stragglers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bottleneck_oracle.agent.answer_text import (
    confidence_of,
    moved,
    rank_list,
    result_of,
    signed,
    template,
    whatif_check,
)
from bottleneck_oracle.agent.intents import Slots
from bottleneck_oracle.agent.planner import Result, edit_for
from bottleneck_oracle.agent.answers_stragglers import stragglers_reply
from bottleneck_oracle.agent.reply import Evidence, Reply
from bottleneck_oracle.prompts import load_yaml

__all__ = ["missing_tools", "remedies_first", "write_answer", "write_reply"]


def remedies_first(found: dict[str, Any] | None, category: str | None, k: int = 2) -> list[dict[str, Any]]:
    """Playbook entries of the cause's category first, then the nearest others."""
    entries = (found or {}).get("entries", [])
    return sorted(entries, key=lambda r: r.get("category") != category)[:k]


def _gpu_bound(e: dict[str, Any]) -> Reply | None:
    """The GPU-bound verdict of an ``explain_step`` result (None when the step is not bound)."""
    b = e.get("gpu_bound")
    if not b:
        return None
    classes = ", ".join(f"{c['class']} {c['ms']} ms" for c in b["op_classes"][:3]) or "none"
    return Reply(template("gpu_bound", step=e["step"], rank=e["rank"], wall_ms=e["wall_ms"], busy_pct=b["busy_pct"],
                          busy_ms=b["busy_ms"]),
                 [Evidence(template("gpu_classes", classes=classes), "explain_step")],
                 action=template("gpu_bound_action", busy_ms=b["busy_ms"]),
                 check=template("check_gpu", trace=e.get("trace") or "TRACE", step=e["step"]))


def _waited(cause: dict[str, Any]) -> str:
    """Which ranks waited for the cause, and how long, where the analysis says so."""
    waited = cause.get("waited")
    if not waited:
        return ""
    if isinstance(waited, dict):
        waited = [{"rank": k, "ms": v} for k, v in waited.items()]
    items = [w if isinstance(w, dict) else {"rank": w} for w in waited]
    ranks = rank_list([w["rank"] for w in items])
    times = [w.get("ms", w.get("waited_ms")) for w in items]
    if all(t is not None for t in times):
        return template("waited_ms", ranks=ranks, ms=", ".join(f"{t}" for t in times))
    return template("waited", ranks=ranks)


def _also(findings: Iterable[dict[str, Any]]) -> str:
    """The step's other findings, one entry per category in the order met: ``pipeline_bubble on rank(s)
    0-15 (149.901 to 150.11 ms)`` (every stage's GPU idled behind one stall is one entry, not 16)."""
    by_category: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        by_category.setdefault(f["category"], []).append(f)
    out = []
    for category, group in by_category.items():
        ranks = sorted({r for f in group for r in f["ranks"]})
        lo, hi = min(f["impact_ms"] for f in group), max(f["impact_ms"] for f in group)
        out.append(f"{category} on rank(s) {rank_list(ranks)} ({lo} ms)" if lo == hi
                   else f"{category} on rank(s) {rank_list(ranks)} ({lo} to {hi} ms)")
    return "; ".join(out)


def _cause_ranks(cause: dict[str, Any]) -> str:
    """``8``, or ``8 and on ranks 0-7, 9-15 with it`` for a stall the other ranks had too, hidden behind it."""
    ranks = cause.get("ranks") or []
    head = cause.get("rank", ranks[0] if ranks else "")
    others = [r for r in ranks if r != head]
    return f"{head} and on rank(s) {rank_list(others)} with it" if others else f"{head}"


def _verdict(e: dict[str, Any], cause: dict[str, Any]) -> str:
    words = load_yaml("answers")["cause_words"].get(cause["category"], cause["category"])
    values = dict(e) | {"words": words, "impact_ms": cause["impact_ms"], "waited": _waited(cause),
                        "cause_rank": _cause_ranks(cause)}
    return template("slow" if e.get("median_ms") is not None else "slow_no_median", **values)


def _fix(w: dict[str, Any] | None, entries: list[dict[str, Any]], trace: str | None) -> dict[str, Any]:
    """Do, confidence and check from the what-if of the cause's fix."""
    if not w or "error" in w:
        return {}
    how = f" ({entries[0]['title']})" if entries else ""
    interval = " " + template("fix_interval", lo_ms=w["interval_ms"][0], hi_ms=w["interval_ms"][1]) \
        if w.get("interval_ms") else ""  # templates come on one line, stripped: the space goes here
    return {"action": template("fix_action", edit=w["edits"][0], how=how, step=w["step"], best_ms=w["best_ms"],
                               baseline_ms=w["baseline_ms"], interval=interval, gain_ms=w["gain_ms"],
                               chosen=w["chosen"]),
            "confidence": confidence_of(w["predicted_ms"], w["chosen"]),
            "check": whatif_check(trace, w["edits"][0], w["step"])}


def _why_slow(results: list[Result], intent: str) -> Reply:
    e = result_of(results, "explain_step")
    assert e is not None
    cause = e.get("cause")
    bound = _gpu_bound(e)
    if cause is None and bound is not None:  # no host-side cause: the GPU's own time is the step's
        return bound
    untraced = e.get("untraced_wait")
    if cause is None and untraced:  # the step waited on what the trace does not hold: say so, name no cause
        return Reply(template("untraced_step", **untraced | {"wall_ms": e["wall_ms"]}),
                     [Evidence(template("untraced_evidence", idle_ms=e["breakdown_ms"]["idle"], ms=untraced["ms"]),
                               "explain_step")],
                     check=template("untraced_check"))
    if cause is None:
        if e.get("median_ms") is None:
            return Reply(template("no_median", **e))
        run = result_of(results, "job_bound")
        like_others = [Evidence(template("run_of_step", headline=run["run"]["headline"]), "job_bound")] if run else []
        return Reply(template("not_slow" if intent == "explain" else "none_slow", **e), like_others)
    ops = ", ".join(f"'{op}'" for op in cause["ops"]) or "(none named)"
    evidence = [Evidence(template("cause", category=cause["category"], ranks=rank_list(cause["ranks"]), ops=ops,
                                  evidence=cause["evidence"].rstrip(".")), "explain_step")]
    delta = moved(e.get("delta_ms") or {})
    if delta != "nothing":
        evidence.append(Evidence(template("moved", moved=delta), "explain_step"))
    others = _also(f for f in e["findings"] if (f["category"], f["ranks"]) != (cause["category"], cause["ranks"])
                   and f["severity"] == "major" and f["step"] == e["step"])
    if others:
        evidence.append(Evidence(template("also", others=others), "explain_step"))
    if bound is not None:
        evidence += [Evidence(bound.verdict, "explain_step"), *bound.evidence]
    entries = remedies_first(result_of(results, "playbook_search"), cause["category"])
    playbook = [Evidence(template("remedy", title=r["title"], remedy=r["remedy"].rstrip(".")), "playbook_search")
                for r in entries]
    w = result_of(results, "whatif")
    reply = Reply(_verdict(e, cause), evidence + playbook[:1], **_fix(w, entries, e.get("trace")))
    reply.details = [f"{p.text} [{p.tool}]" for p in playbook[1:]]  # the next remedy, with --verbose
    return reply


def _whatif(w: dict[str, Any], trace: str | None) -> Reply:
    edit = "; ".join(w["edits"])
    evidence = [Evidence(template("whatif_predictor", chosen=w["chosen"], why=w["why"]), "whatif")]
    if w.get("interval_ms"):
        lo, hi = w["interval_ms"]
        evidence.append(Evidence(template("whatif_interval", lo_ms=lo, hi_ms=hi,
                                          sources="; ".join(w["interval_from"])), "whatif"))
    changed = [f"'{x['op']}' {signed(x['delta_ms'])}" for x in (w.get("moved") or {}).get("changed", [])[:3]]
    if changed:
        evidence.append(Evidence(template("whatif_moved", moved="; ".join(changed)), "whatif"))
    if w["gain_ms"] < 0:  # a slow-down asked about (a slower network): its cost, no action to take
        return Reply(template("whatif_slower", edit=edit, step=w["step"], best_ms=w["best_ms"],
                              baseline_ms=w["baseline_ms"], cost_ms=round(-w["gain_ms"], 3)), evidence,
                     confidence=confidence_of(w["predicted_ms"], w["chosen"]))
    return Reply(template("whatif", edit=edit, step=w["step"], best_ms=w["best_ms"], baseline_ms=w["baseline_ms"],
                          gain_ms=w["gain_ms"]), evidence,
                 action=template("whatif_action", edit=edit, gain_ms=w["gain_ms"], step=w["step"], chosen=w["chosen"]),
                 confidence=confidence_of(w["predicted_ms"], w["chosen"]),
                 check=whatif_check(trace, w["edits"][0], w["step"]))


def _optimize(o: dict[str, Any], trace: str | None) -> Reply:
    plan = o["plan"]
    if not plan:
        return Reply(template("optimize_none", step=o["step"], baseline_ms=o["baseline_ms"]))
    first = plan[0]
    evidence = []
    if len(plan) > 1:
        evidence.append(Evidence(template("optimize_then", rest="; ".join(
            f"`{p['edit']}` to {p['predicted_ms']} ms ({p['gain_ms']} ms more saved)" for p in plan[1:])), "optimize"))
    chosen = next((c for c in o["candidates"] if c["edit"] == first["edit"]), {})
    remedies = chosen.get("remedies") or []
    if remedies:
        evidence.append(Evidence(template("optimize_how", remedies="; ".join(remedies[:3])), "optimize"))
    others = [c for c in o["candidates"] if c["edit"] != first["edit"] and (c["gain_ms"] or 0) > 0][:3]
    if others:
        evidence.append(Evidence(template("optimize_others", others="; ".join(
            f"`{c['edit']}` ({c['category']}) {c['gain_ms']} ms ({c['predictor']})" for c in others)), "optimize"))
    sure = chosen.get("confidence")
    return Reply(template("optimize_first", **first | {"step": o["step"], "baseline_ms": o["baseline_ms"]}), evidence,
                 action=template("optimize_action", remedy=remedies[0] if remedies else first["category"],
                                 edit=first["edit"], gain_ms=first["gain_ms"], predictor=first["predictor"]),
                 confidence=str(sure) if sure is not None else f"medium: predicted by {first['predictor']} alone",
                 check=whatif_check(trace, first["edit"], o["step"]))


def _seen(results: list[Result]) -> Reply:
    e, s, p = (result_of(results, n) for n in ("explain_step", "similar_findings", "playbook_search"))
    cause = (e or {}).get("cause") or {}
    itself = ((e or {}).get("trace"), (e or {}).get("step"), cause.get("category"))
    found = [f for f in (s or {}).get("findings", [])
             if (f.get("trace_name"), f.get("step"), f.get("category")) != itself]
    names = [{"trace": f.get("trace_name") or f.get("trace"), "step": f.get("step"), "category": f.get("category"),
              "similarity": f.get("similarity")} for f in found[:5]]
    entries = remedies_first(p, cause.get("category"))
    evidence = [Evidence(template("seen_other", **n), "similar_findings") for n in names[1:]]
    evidence += [Evidence(template("remedy", title=r["title"], remedy=r["remedy"].rstrip(".")), "playbook_search")
                 for r in entries]
    if not names:
        verdict = (template("seen_none", step=e["step"], category=cause["category"]) if cause and e
                   else template("seen_none_cause"))
        return Reply(verdict, evidence)
    return Reply(template("seen", step=(e or {}).get("step"), category=cause.get("category", "no finding"),
                          first=template("similar", **names[0])), evidence)


def _hang(h: dict[str, Any]) -> Reply:
    """The hang verdict of the dumps (``hang_report``): its sentences as the tool wrote them."""
    first, rest = h["explanation"][0], h["explanation"][1:]
    if h["verdict"] != "hang":
        verdict = template("hang_none" if h["verdict"] == "none" else "hang_unknown", first=first)
    else:
        verdict = template("hang_verdict", first=first, second=rest[0] if rest else "")
        rest = rest[1:]
    evidence = [Evidence(line, "hang_report") for line in rest]
    evidence += [Evidence(template("hang_where", rank=r, where=w), "hang_report") for r, w in h["where"].items()]
    d = h.get("first_divergence")
    if d and h["cause"] != "mismatch":  # a mismatch's divergence is the verdict's own sentence
        found = "; ".join(f"rank {r}: {v}" for r, v in d["found"].items())
        evidence.append(Evidence(template("hang_divergence", found=found, **d), "hang_report"))
    for p in h.get("profiled", []):
        if p.get("step") is not None:
            ops = "; ".join(f"{o['op']} {o['ms']} ms" for o in p["top_ops"]) or "none"
            evidence.append(Evidence(template("hang_profiled", ops=ops, **p), "hang_report"))
    if h["missing_dumps"] and h["cause"] != "missing_dump":
        evidence.append(Evidence(template("hang_missing", ranks=rank_list(h["missing_dumps"])), "hang_report"))
    sure = (template("hang_confidence_high") if h["verdict"] == "hang" and h["culprit_ranks"] and not h["missing_dumps"]
            else template("hang_confidence_medium", why="some ranks left no dump" if h["missing_dumps"]
                          else "no rank could be named" if h["verdict"] == "hang" else "the dumps show no stuck call"))
    traces = f" --traces {h['profiled_from']}" if h.get("profiled_from") else ""
    return Reply(verdict, evidence, action=h["next_steps"][0] if h["next_steps"] else None, confidence=sure,
                 check=template("check_hang", dumps=h["dumps"], traces=traces))


def missing_tools(names: list[str]) -> str:
    """The answer when the plan needs tools the caller did not offer."""
    return template("missing_tools", tools=", ".join(names))


def _trace_name(results: list[Result]) -> str | None:
    return next((r.data["trace"] for r in results if isinstance(r.data.get("trace"), str)), None)


def write_reply(intent: str, slots: Slots, results: list[Result], trace: str | None = None) -> Reply:
    """The answer to a question of ``intent`` from this turn's tool results, in the contract; its
    details hold the intent and every line the short answer leaves out. ``trace``: the trace's name
    for the check's command, when no result names it."""
    from bottleneck_oracle.agent.answers_describe import describe
    from bottleneck_oracle.agent.answers_questions import answer_question

    errors = [r.data["error"] for r in results if not r.ok]
    trace = _trace_name(results) or trace
    if errors:
        reply = Reply(template("error", error=errors[0]))
    elif intent == "out_of_scope":
        reply = Reply(template("out_of_scope"))
    elif intent == "whatif" and not results and edit_for(slots) is None:
        reply = Reply(template("no_trace_change"))
    elif intent == "why_slow" and slots.step is None and slots.rank is None and result_of(results, "job_bound"):
        reply = answer_question(intent, results)  # type: ignore[assignment]  # the run, the slowest step a detail
    elif intent in ("why_slow", "compare_steps") and result_of(results, "explain_step") is not None:
        reply = _why_slow(results, "explain" if slots.step is not None or intent == "compare_steps" else "any")
    elif intent == "whatif" and (w := result_of(results, "whatif")) is not None:
        reply = _whatif(w, trace)
    elif intent == "optimize" and (o := result_of(results, "optimize")) is not None:
        reply = _optimize(o, trace)
    elif intent == "seen_before":
        reply = _seen(results)
    elif intent == "hang" and (h := result_of(results, "hang_report")) is not None:
        reply = _hang(h)
    elif intent == "stragglers" and (p := result_of(results, "straggler_report")) is not None:
        reply = stragglers_reply(p, slots)
    elif (asked := answer_question(intent, results, slots.category, edit_for(slots) is None,
                                   slots.target == "kind=kernel", slots.yes_no, slots.bounds)) is not None:
        reply = asked  # the questions asked next (answers_questions.py)
    else:
        reply = describe(intent, results) or Reply(template("out_of_scope"))
    reply.details = [*reply.details, template("footer", intent=intent)]
    return reply


def write_answer(intent: str, slots: Slots, results: list[Result]) -> str:
    """The answer as a person reads it by default (one screen)."""
    return write_reply(intent, slots, results).render()
