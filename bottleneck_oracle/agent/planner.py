"""The offline planner's tool plans: for an intent and its slots, which tools to call next given
the results so far (``None``: enough to answer). A plan runs in rounds, the way a model would call
tools: explain the step first, then predict the fix of the cause it found."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from bottleneck_oracle.agent.intents import Slots, embedder
from bottleneck_oracle.graphdb.embedding import cached_embed
from bottleneck_oracle.prompts import load_yaml

__all__ = ["Call", "Result", "edit_for", "next_calls", "pipeline_edits"]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call to make."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Result:
    """A tool call made in this turn and its parsed result."""

    name: str
    args: dict[str, Any]
    data: dict[str, Any]

    @property
    def ok(self) -> bool:
        return "error" not in self.data


def _step_args(slots: Slots) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if slots.step is not None:
        args["step"] = slots.step
    if slots.rank is not None:
        args["rank"] = slots.rank
    return args


def edit_for(slots: Slots) -> str | None:
    """The edit a what-if question asks about, in the edit language; None when it names none."""
    if slots.data_parallel:
        return f"data_parallel={slots.data_parallel}"
    if slots.microbatches:
        return f"microbatches={slots.microbatches}"
    if slots.category and (slots.fix or slots.removal or not slots.target):
        return f"fix {slots.category}"
    if slots.target and slots.removal:
        return f"remove {slots.target}"
    if slots.target:
        return f"scale {slots.target} x{slots.factor or 2:g}"
    return None


def pipeline_edits(slots: Slots) -> list[str]:
    """The what-ifs a question about a pipeline job asks, each an edit of ``oracle stragglers --whatif``: the
    ranks it names healthy, no stragglers at all, a layer moved between stages (only with the layers each
    stage holds: the edit needs them), equal work per micro-batch."""
    edits = []
    if slots.ranks:
        edits.append("fix straggler_rank rank=" + ",".join(map(str, slots.ranks)))
    elif slots.category == "straggler_rank" and (slots.removal or slots.fix):
        edits.append("fix straggler_rank")
    if slots.stage_move is not None and slots.layers:
        edits.append(f"move_layer {slots.stage_move[0]}->{slots.stage_move[1]} layers={slots.layers}")
    if slots.even_work:
        edits.append("even_microbatches")
    return edits


@functools.cache
def _cypher_templates() -> tuple[tuple[dict[str, Any], ...], np.ndarray]:
    templates = tuple(load_yaml("cypher"))
    return templates, cached_embed([t["question"] for t in templates], embedder)


def cypher_call(question: str, slots: Slots) -> Call:
    """The nearest read-only query template for a free question, with its parameters (a template that
    needs an op name is passed over when the question names none)."""
    templates, vectors = _cypher_templates()
    order = np.argsort(-(vectors @ embedder().embed([question.lower()])[0]))
    best = next(templates[i] for i in order if "$name" not in templates[i]["query"] or slots.names)
    params: dict[str, Any] = {}
    text = best["query"]
    if "$name" in text:
        params["name"] = slots.names[0]
    if "$rank" in text:
        params["rank"] = slots.rank if slots.rank is not None else 0
    if "$step" in text and slots.step is not None:
        params["step"] = slots.step
    elif "$step" in text:
        text = re.sub(r"\s*WHERE \w+\.step = \$step", "", text)  # no step named: every step
    return Call("cypher", {"query": text, "params": params})


def _first(results: list[Result], name: str) -> Result | None:
    return next((r for r in results if r.name == name), None)


_QUESTIONS = ("step_time", "top_ops", "job_bound", "rank_like_peers", "whatif_run", "slowest_step", "explain_category")


def _question_calls(intent: str, slots: Slots, question: str, results: list[Result]) -> list[Call] | None:
    """The plans of the questions asked after "why is step N slow?" (answers_questions.py answers them)."""
    if intent == "step_time":  # the step's attribution and GPU timeline
        return [Call("explain_step", _step_args(slots))]
    if intent in ("job_bound", "gpu_busy"):  # no step named: the run's steady steps
        return [Call("job_bound", {})]
    if intent == "top_ops":
        return [Call("top_ops", {"step": slots.step} if slots.step is not None else {})]
    if intent == "slowest_step":
        return [Call("list_steps", {})]
    if intent == "explain_category":
        return [Call("playbook_search", {"query": slots.category or question, "k": 2}
                     | ({"category": slots.category} if slots.category else {}))]
    if intent == "whatif_run":
        edit = edit_for(slots)
        return None if edit is None else [Call("whatif_run", {"edit": edit})]
    if "rank_like_peers" in {r.name for r in results}:
        return None
    explained = _first(results, "explain_step")  # no rank named: the rank that delayed the step
    if slots.rank is None and explained is None:
        return [Call("explain_step", _step_args(slots))]
    rank = slots.rank if slots.rank is not None else (explained.data.get("cause") or explained.data)["rank"]  # type: ignore[union-attr]
    step = slots.step if slots.step is not None else explained.data["step"] if explained else None
    return [Call("rank_like_peers", {"rank": rank} | ({"step": step} if step is not None else {}))]


def next_calls(intent: str, slots: Slots, question: str, results: list[Result]) -> list[Call] | None:
    """The next round of tool calls for the question, or None when the results answer it."""
    done = {r.name for r in results}
    if any(not r.ok for r in results):
        return None  # an error is answered (a step that does not exist lists those that do)
    if intent == "why_slow" and slots.step is None and slots.rank is None:
        # a question about the run: its verdict first, the slowest step (and its cause) as a detail
        return None if done else [Call("job_bound", {}), Call("explain_step", {})]
    if intent in ("why_slow", "seen_before"):
        if "explain_step" not in done:
            return [Call("explain_step", _step_args(slots))]
        explained = _first(results, "explain_step").data  # type: ignore[union-attr]
        cause = explained.get("cause")
        if cause is None and intent == "why_slow":  # a step like the others: the answer is the run's
            return None if "job_bound" in done or explained.get("slow") else [Call("job_bound", {})]
        if cause is None:
            return None if "similar_findings" in done else [Call("similar_findings", {"query": question, "k": 5})]
        if intent == "seen_before" and "similar_findings" not in done:
            return [Call("similar_findings", {"query": f"{cause['category']}: {cause['evidence']}", "k": 5}),
                    Call("playbook_search", {"query": cause["evidence"], "k": 2, "category": cause["category"]})]
        if intent == "why_slow" and "whatif" not in done:
            step = _first(results, "explain_step").data["step"]  # type: ignore[union-attr]
            return [Call("whatif", {"edit": f"fix {cause['category']}", "step": step}),
                    Call("playbook_search", {"query": cause["evidence"], "k": 2, "category": cause["category"]})]
        return None
    if intent == "straggler":
        return None if done else [Call("stragglers", {"step": slots.step} if slots.step is not None else {})]
    if intent == "critical_path":
        return None if done else [Call("critical_subgraph", _step_args(slots))]
    if intent == "compare_steps":
        if done:
            return None
        if len(slots.steps) >= 2:  # the step asked about first, the reference second
            args = {"step_a": slots.steps[1], "step_b": slots.steps[0]}
            return [Call("compare_steps", args | ({"rank": slots.rank} if slots.rank is not None else {}))]
        return [Call("explain_step", _step_args(slots))]  # one step: against its median step
    if intent == "compare_ranks":
        if done or slots.rank is None:
            return None
        args = {"rank_b": slots.ranks[0]} | ({"rank_a": slots.ranks[1]} if len(slots.ranks) > 1 else {})
        return [Call("compare_ranks", args | ({"step": slots.step} if slots.step is not None else {}))]
    if intent == "compare_runs":
        if "list_traces" not in done:
            return [Call("list_traces", {})]
        if "compare_runs" in done:
            return None
        traces = [t for t in _first(results, "list_traces").data["traces"] if t["status"] == "complete"]  # type: ignore[union-attr]
        if len(traces) < 2:
            return None
        named = sorted((question.find(t["name"]), t["name"]) for t in traces if t["name"] in question)
        if len(named) >= 2:  # "why is B slower than A": B first, A the reference
            return [Call("compare_runs", {"base": named[1][1], "other": named[0][1]})]
        return [Call("compare_runs", {"base": traces[1]["trace_id"], "other": traces[0]["trace_id"]})]
    if intent == "whatif":
        edit = edit_for(slots)
        if done or edit is None:
            return None
        return [Call("whatif", {"edit": edit} | ({"step": slots.step} if slots.step is not None else {}))]
    if intent == "optimize":
        # the first change and the ranked candidates; a longer plan re-analyses the job after each change
        return None if done else [Call("optimize", ({"step": slots.step} if slots.step is not None else {})
                                       | {"budget": 1})]
    if intent in ("list_steps", "slowest_step") and slots.yes_no:  # "did any step run abnormally long?"
        return None if done else [Call("list_steps", {}), Call("job_bound", {})]
    if intent == "list_steps":
        return None if done else [Call("list_steps", {})]
    if intent in _QUESTIONS or (intent == "gpu_busy" and slots.step is None):
        return None if done and intent != "rank_like_peers" else _question_calls(intent, slots, question, results)
    if intent == "gpu_busy":  # the step's GPU timeline and GPU-bound verdict
        return None if done else [Call("explain_step", _step_args(slots))]
    if intent == "list_traces":
        return None if done else [Call("list_traces", {})]
    if intent == "hang":
        return None if done else [Call("hang_report", {})]
    if intent == "stragglers":
        edits = pipeline_edits(slots)
        return None if done else [Call("straggler_report", {"whatif": edits} if edits else {})]
    if intent == "cypher":
        return None if done else [cypher_call(question, slots)]
    return None
