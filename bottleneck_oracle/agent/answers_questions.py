"""The offline answers, in the answer contract, to the questions asked after "why is step N slow?":
where a step's time goes, what bounds the job, the top ops, the slowest step, what a rank costs, what
a change saves over the run, what a finding means. Every number is one a tool returned
(``prompts/answers_questions.yaml`` holds the words)."""

from __future__ import annotations

from typing import Any

from bottleneck_oracle.agent.answer_text import moved, result_of
from bottleneck_oracle.agent.planner import Result
from bottleneck_oracle.agent.reply import Evidence, Reply
from bottleneck_oracle.prompts import load_yaml
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["INTENTS", "answer_question"]

INTENTS = ("step_time", "top_ops", "job_bound", "rank_like_peers", "whatif_run", "slowest_step", "explain_category")


def _t(name: str, **values: Any) -> str:
    return " ".join(str(load_yaml("answers_questions")[name]).split()).format(**values)


def _ops(ops: list[dict[str, Any]], k: int) -> str:
    return "; ".join(f"'{o['op']}' {o['critical_ms']} ms" for o in ops[:k]) or "none"


def _gpu_line(gpu: dict[str, Any] | None, tool: str, name: str = "step_gpu") -> Evidence:
    return Evidence(_t(name, **gpu) if gpu else _t("no_gpu"), tool)


def _step_time(e: dict[str, Any]) -> Reply:
    top = moved({k: v for k, v in sorted(e["breakdown_ms"].items(), key=lambda kv: -kv[1]) if v > 0}, limit=4)
    evidence = [_gpu_line(e.get("gpu"), "explain_step")]
    if e.get("median_ms") is not None:
        evidence.append(Evidence(_t("step_time_median", median_ms=e["median_ms"], moved=moved(e["delta_ms"])),
                                 "explain_step"))
    if e.get("untraced_wait"):
        evidence.append(Evidence(_t("step_untraced", **e["untraced_wait"]), "explain_step"))
    evidence.append(Evidence(_t("step_ops", ops=_ops(e.get("top_ops") or [], 3)), "explain_step"))
    return Reply(_t("step_time", step=e["step"], rank=e["rank"], wall_ms=e["wall_ms"], top=top.replace("+", "")),
                 evidence, check=_t("check_step", trace=e.get("trace") or "TRACE", step=e["step"]))


def _run_verdict(b: dict[str, Any], explained: dict[str, Any] | None = None, asked: str | None = None) -> Reply:
    """The run's verdict (``job_bound``'s ``run``), its causes, the GPU, the slowest step as a detail (with its
    cause, from ``explained``, when it has one), and the fix that saves most; ``asked``: the one bound a yes/no
    question names, answered yes or no first."""
    run = b["run"]
    causes = "; ".join(_t("run_cause", cause=c["cause"], exposed_ms=c["exposed_ms"], exposed_pct=c["exposed_pct"],
                          saving=_saving(c)) for c in run["causes"][:5])
    evidence = [Evidence(_t("run_causes", causes=causes), "job_bound"), _gpu_line(b.get("gpu"), "job_bound", "job_gpu")]
    s = b.get("slowest")
    if s:
        evidence.append(Evidence(_t("slowest_abnormal" if s["slow"] else "slowest_normal", **s
                                    | {"ratio": round(s["wall_ms"] / s["median_ms"], 2) if s["median_ms"] else 0}),
                                 "job_bound"))
        cause = (explained or {}).get("cause")
        if s["slow"] and cause and explained and explained.get("step") == s["step"]:
            evidence.append(Evidence(_t("slowest_cause", category=cause["category"], step=s["step"],
                                        ranks=", ".join(map(str, cause["ranks"])), impact_ms=cause["impact_ms"]),
                                     "explain_step"))
    if run["set_aside"]:
        evidence.append(Evidence(_t("run_set_aside", steps=", ".join(map(str, run["set_aside"]))), "job_bound"))
    c = run["cause"]
    action = None
    if c and c["saving_ms"] is not None and c["edits"]:
        iv = c["saving_interval_ms"]
        action = _t("run_action", trace=b["trace"], edit=c["edits"][0], saving_ms=c["saving_ms"],
                    median_step_ms=run["median_step_ms"],
                    interval=" " + _t("run_action_interval", lo=iv[0], hi=iv[1]) if iv else "")
    verdict = run["headline"]
    if asked:  # "is the job input-bound?": yes or no first
        named = run["cause"]["cause"] if run["cause"] else "gpu"
        verdict = ("Yes: " if named == asked else "No: ") + verdict
    reply = Reply(verdict, evidence, action=action, check=_t("run_check", trace=b["trace"]))
    reply.details = [_t("run_rule", rule=run["rule"])]
    return reply


def _saving(c: dict[str, Any]) -> str:
    if c["saving_ms"] is None:
        return ""
    iv = c["saving_interval_ms"]
    return (_t("run_saving", saving_ms=c["saving_ms"], lo=iv[0], hi=iv[1]) if iv
            else _t("run_saving_bare", saving_ms=c["saving_ms"]))


def _abnormal(b: dict[str, Any]) -> Reply:
    """Did any step run abnormally long? Yes or no first, by the rule the findings use, stated."""
    s = b.get("slowest")
    if not s:
        return Reply(_t("slowest_slow", slow="no rank has three complete steps to compare"))
    rule = Evidence(_t("abnormal_rule", **s), "job_bound")
    run = Evidence(_t("step_like_others", headline=b["run"]["headline"]), "job_bound")
    if not s["slow_steps"]:
        return Reply(_t("no_abnormal", **s), [rule, run], check=_t("run_check", trace=b["trace"]))
    first, *rest = s["slow_steps"]
    evidence = [rule]
    if rest:
        evidence.append(Evidence(_t("yes_others", others="; ".join(
            f"step {x['step']} rank {x['rank']} {x['wall_ms']} ms ({x['ratio']}x)" for x in rest[:4])), "job_bound"))
    return Reply(_t("yes_abnormal", **first), [*evidence, run], check=_t("check_slowest", step=first["step"]))


def _job_bound(b: dict[str, Any], asked: str | None = None) -> Reply:
    if "run" in b and b["bound"] != "untraced":
        return _run_verdict(b, asked=asked)
    shares = ", ".join(f"{k} {v}%" for k, v in sorted(b["shares_pct"].items(), key=lambda kv: -kv[1]))
    cats = "; ".join(f"{k} {v} ms" for k, v in b["breakdown_ms"].items() if v > 0)
    if b["bound"] == "untraced":
        rest = ", ".join(f"{k} {v}%" for k, v in sorted(b["shares_pct"].items(), key=lambda kv: -kv[1]) if k != "untraced")
        return Reply(_t("job_untraced", n=b["steady_steps"], wall_ms=b["wall_ms"], ranks=b["ranks"],
                        pct=b["shares_pct"]["untraced"], shares=rest),
                     [Evidence(_t("job_cats", cats=cats), "job_bound"), _gpu_line(b.get("gpu"), "job_bound", "job_gpu")],
                     check=_t("check_job", trace=b["trace"]))
    return Reply(_t("job_bound", bound=b["bound"], n=b["steady_steps"], wall_ms=b["wall_ms"], ranks=b["ranks"],
                    shares=shares),
                 [Evidence(_t("job_cats", cats=cats), "job_bound"), _gpu_line(b.get("gpu"), "job_bound", "job_gpu")],
                 check=_t("check_job", trace=b["trace"]))


def _top_ops(o: dict[str, Any], kernels_first: bool = False) -> Reply:
    """Host ops by critical-path time and GPU kernels (readable names) by GPU time, apart; the kernels
    first when the question asked about kernels."""
    gpu_kinds = ("kernel", "memcpy", "memset")  # GPU work is listed by readable name with the kernels
    host = [op for op in o["ops"] if op["kind"] not in gpu_kinds] if kernels_first else o["ops"]
    lines = [_t("top_op", **op) for op in host[:5]]
    kernels = [_t("top_kernel", short_name=k["short_name"], dur_ms=k["dur_ms"], count=k["count"])
               for k in (o.get("kernels") or [])[:5]]
    where = "run" if o["step"] is None else "step"
    if kernels_first and kernels:
        verdict = _t(f"top_kernels_{where}", first=kernels[0], step=o["step"])
        host = Evidence(_t("top_ops_host", ops="; ".join(lines[:3]) or "none"), "top_ops")
        return Reply(verdict, [*(Evidence(line, "top_ops") for line in kernels[1:]), host])
    first = lines[0] if lines else "none"
    verdict = (_t("top_ops_run", steps=o["steps"], first=first) if o["step"] is None
               else _t("top_ops_step", step=o["step"], rank=o["rank"], first=first))
    gpu = [Evidence(_t("top_kernels_gpu", kernels="; ".join(kernels[:3])), "top_ops")] if kernels else []
    return Reply(verdict, [*(Evidence(line, "top_ops") for line in lines[1:]), *gpu])


def _slowest(s: dict[str, Any]) -> Reply:
    done = sorted((x for x in s["steps"] if not x["partial"]), key=lambda x: -x["wall_ms"])
    if not done:
        return Reply(_t("slowest_slow", slow="no complete step"))
    top = done[0]
    evidence = [Evidence(_t("slowest_next", others=", ".join(f"step {x['step']} {x['wall_ms']} ms" for x in done[1:4])),
                         "list_steps")] if len(done) > 1 else []
    if s["slow_steps"]:
        slow = "; ".join(f"step {x['step']} rank {x['rank']} (+{x['excess_ms']} ms)" for x in s["slow_steps"][:4])
        evidence.append(Evidence(_t("slowest_slow", slow=slow), "list_steps"))
    return Reply(_t("slowest", step=top["step"], wall_ms=top["wall_ms"], rank=top["slowest_rank"],
                    median_ms=s["median_step_ms"]), evidence, check=_t("check_slowest", step=top["step"]))


def _like_peers(p: dict[str, Any]) -> Reply:
    edits = "; ".join(f"`{e}`" for e in p["edits"])
    return Reply(_t("like_peers", **p), [
        Evidence(_t("like_peers_walls", step=p["step"], rank=p["rank"], rank_ms=p["rank_ms"],
                    peers=", ".join(map(str, p["peers_ms"]))), "rank_like_peers"),
        Evidence(_t("like_peers_how", chosen=p["chosen"], composed=p["composed"], edits=edits), "rank_like_peers")],
        action=_t("like_peers_action", rank=p["rank"], step=p["step"], edits=edits, gain_ms=p["gain_ms"]),
        confidence=f"medium: only the {p['chosen']} predicted it",
        check=f"oracle whatif {p['trace']} {' '.join(repr(e) for e in p['edits'])} --step {p['step']}")


def _run_whatif(w: dict[str, Any]) -> Reply:
    per_step = "; ".join(f"step {x['step']} {x['gain_ms']} ms" for x in w["per_step"][:4])
    evidence = [Evidence(_t("run_whatif_steps", per_step=per_step), "whatif_run")]
    if w.get("untouched_steps"):
        evidence.append(Evidence(_t("run_whatif_untouched", steps=", ".join(map(str, w["untouched_steps"]))),
                                 "whatif_run"))
    return Reply(_t("run_whatif", **w), evidence,
                 action=_t("run_whatif_action", edit=w["edit"], gain_ms=w["gain_ms"]),
                 confidence="medium: the replay's prediction, step by step",
                 check=_t("check_run", trace=w["trace"], edit=w["edit"], step=w["per_step"][0]["step"]))


def _category(p: dict[str, Any] | None, category: str | None) -> Reply:
    words = load_yaml("answers")["cause_words"]
    if category is None:
        return Reply(_t("category_unknown", categories=", ".join(b.value for b in Bottleneck if b.value != "none")))
    entries = [e for e in (p or {}).get("entries", []) if e.get("category") == category]
    evidence = [Evidence(_t("category_entry", title=e["title"], remedy=str(e.get("signal") or e["remedy"]).rstrip(".")),
                         "playbook_search") for e in entries[:2]]
    return Reply(_t("category", category=category, words=words.get(category, category)), evidence)


def answer_question(intent: str, results: list[Result], category: str | None = None,
                    no_change: bool = False, kernels_first: bool = False, yes_no: bool = False,
                    bounds: tuple[str, ...] = ()) -> Reply | None:
    """The answer to a question of these intents from this turn's results; None when they do not hold it.
    ``kernels_first``: the question asked about kernels (the top ops answer lists GPU kernels first);
    ``yes_no``: it asked for a yes or a no (answered first), of the one bound in ``bounds`` it names."""
    found = {name: result_of(results, name) for name in
             ("explain_step", "job_bound", "top_ops", "list_steps", "rank_like_peers", "whatif_run", "playbook_search")}
    if intent == "why_slow" and found["job_bound"] is not None:  # asked about the run, no step named
        return _run_verdict(found["job_bound"], found["explain_step"])
    if intent in ("slowest_step", "list_steps") and yes_no and found["job_bound"] is not None:
        return _abnormal(found["job_bound"])
    if intent == "whatif_run" and found["whatif_run"] is None and no_change:
        return Reply(_t("no_change"))
    if intent == "explain_category":
        return _category(found["playbook_search"], category)
    if intent in ("job_bound", "gpu_busy") and found["job_bound"] is not None:
        return _job_bound(found["job_bound"], bounds[0] if yes_no and len(bounds) == 1 else None)
    if intent == "top_ops" and found["top_ops"] is not None:
        return _top_ops(found["top_ops"], kernels_first)
    writers = {"step_time": ("explain_step", _step_time),
               "slowest_step": ("list_steps", _slowest), "rank_like_peers": ("rank_like_peers", _like_peers),
               "whatif_run": ("whatif_run", _run_whatif)}
    if intent in writers and found[writers[intent][0]] is not None:
        return writers[intent][1](found[writers[intent][0]])  # type: ignore[arg-type]
    return None
