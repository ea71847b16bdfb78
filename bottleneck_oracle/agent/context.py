"""What a follow-up question refers to. Each turn's trace, step, rank, cause and edit, read from the
tool calls and results of the earlier turns in the message history, are the context of the next:
"and on rank 1?" asks the last question again on rank 1, "what about step 6?" on step 6, "why?" why
that step is slow, "what should I do about it?" what to change on that step, "how much would that
save?" the what-if of the last edit (or of the fix of the last cause) on that step, and "it", "that",
"there" name the last step where a question names none. The intent is still the classifier's for any
other question: these patterns only read references, as ``intents.read_slots`` reads numbers."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bottleneck_oracle.agent.intents import Slots
from bottleneck_oracle.agent.planner import edit_for

__all__ = ["RECENT_TURNS", "REPAIR_NAME", "TurnContext", "context_of", "recent", "resolve", "slots_of_edit"]

REPAIR_NAME = "grounding_check"  # the name on the message the grounding check sends back: no question
RECENT_TURNS = 4  # follow-ups refer to the last few turns; a long session is not re-read whole each turn

_ANAPHOR = re.compile(r"\b(it|that|this|there|these|those|the same( step)?)\b", re.I)
_AGAIN_RANK = re.compile(r"^\W*(?:and|but|ok|so)?\s*(?:(?:what|how) about\s*)?(?:on|for|in|with|at)?\s*"
                         r"(?:the\s+)?(?:rank|gpu|worker|process)\s*#?\s*(\d+)\W*$", re.I)
_AGAIN_STEP = re.compile(r"^\W*(?:and|but|ok|so)?\s*(?:(?:what|how) about\s*)?(?:on|for|in|with|at)?\s*"
                         r"(?:the\s+)?(?:step|iteration|iter)\s*#?\s*(\d+)\W*$", re.I)
_WHY = re.compile(r"^\W*(?:and|but|so|ok)?\s*why\b(?:\s+(?:is|was|does|did)\s+(?:it|that|this)\b.*)?\W*$", re.I)
_REMEDY = re.compile(r"\b(?:what\s+(?:should|can|could|do|would)\s+(?:i|we)\s+(?:do|change)|"
                     r"how\s+(?:do|can|should|could|would)\s+(?:i|we)\s+(?:fix|solve|avoid|improve|speed up|remove)|"
                     r"how\s+to\s+(?:fix|solve|avoid))\b", re.I)
_SAVING = re.compile(r"\b(?:how\s+much|what)\b.*\b(?:save|saves|saved|gain|buy|win|faster|shorter|help)\b", re.I)


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What the earlier turns were about: the last intent answered, the trace (by name where a tool
    gave it), step, rank asked about, cause found and edit predicted."""

    intent: str | None = None
    trace: str | None = None
    step: int | None = None
    rank: int | None = None
    cause: str | None = None
    edit: str | None = None


def recent(messages: Sequence[BaseMessage], turns: int = RECENT_TURNS) -> list[BaseMessage]:
    """The messages of the last ``turns`` questions (the current one included, if asked)."""
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, HumanMessage) and m.name != REPAIR_NAME:
            seen += 1
            if seen == turns:
                return list(messages[i:])
    return list(messages)


def _parsed(content: object) -> dict:
    try:
        data = json.loads(str(content))
    except ValueError:
        return {}
    return data if isinstance(data, dict) and "error" not in data else {}


def _from_result(name: str, data: dict, found: dict) -> None:
    """What one tool's result says about the turn."""
    if isinstance(data.get("trace"), str):
        found["trace"] = data["trace"]
    for key in ("step", "step_b"):
        if isinstance(data.get(key), int):
            found["step"] = data[key]
    if name == "explain_step":
        found["cause"] = (data.get("cause") or {}).get("category")
    elif name == "whatif" and data.get("edits"):
        found["edit"] = data["edits"][0]
    elif name == "optimize" and data.get("plan"):
        found["edit"] = data["plan"][0]["edit"]


def context_of(messages: Sequence[BaseMessage]) -> TurnContext:
    """The context the history leaves: each field from the latest turn that set it; the rank from the
    latest turn that called tools (a question that names no rank asks about none)."""
    found: dict = {}
    calls: dict[str, str] = {}
    asked = False
    for m in messages:
        if isinstance(m, HumanMessage) and m.name != REPAIR_NAME:
            asked = True  # a new question: the first tool call of its turn sets the rank afresh
        elif isinstance(m, AIMessage) and m.tool_calls:
            for c in m.tool_calls:
                calls[c["id"]] = c["name"]
                args = c["args"]
                if asked or isinstance(args.get("rank"), int):
                    found["rank"], asked = args.get("rank") if isinstance(args.get("rank"), int) else None, False
                if isinstance(args.get("trace"), str):
                    found["trace"] = args["trace"]
        elif isinstance(m, ToolMessage) and m.tool_call_id in calls:
            _from_result(calls[m.tool_call_id], _parsed(m.content), found)
        elif isinstance(m, AIMessage) and m.response_metadata.get("intent"):
            found["intent"] = m.response_metadata["intent"]
    return TurnContext(**found)


def slots_of_edit(edit: str) -> Slots:
    """The slots that ``planner.edit_for`` turns back into ``edit`` (its step selector aside: the
    step travels as its own argument)."""
    words = [w for w in edit.split() if not w.startswith("step=")]
    if edit.startswith(("data_parallel=", "microbatches=")):
        key, value = edit.split()[0].split("=")
        return Slots(**{key: int(value)})
    if words[0] == "fix":
        return Slots(category=words[1], fix=True)
    if words[0] == "remove":
        return Slots(target=" ".join(words[1:]), removal=True)
    if words[0] == "scale" and words[-1].startswith("x"):
        return Slots(target=" ".join(words[1:-1]), factor=float(words[-1][1:]))
    return Slots()


def _here(ctx: TurnContext, slots: Slots) -> dict:
    """The step and rank a follow-up means: those it names, else the context's."""
    return {"steps": slots.steps or ((ctx.step,) if ctx.step is not None else ()),
            "ranks": slots.ranks or ((ctx.rank,) if ctx.rank is not None else ())}


def resolve(question: str, intent: str, slots: Slots, ctx: TurnContext) -> tuple[str, Slots]:
    """The intent and slots of ``question`` with its references to the earlier turns resolved."""
    if ctx.intent is None or ctx.intent == "out_of_scope":
        return intent, slots
    q = question.strip()
    if (m := _AGAIN_RANK.match(q)) is not None:  # "and on rank 1?": the last question on that rank
        again = slots_of_edit(ctx.edit) if ctx.intent == "whatif" and ctx.edit else Slots()
        return ctx.intent, dataclasses.replace(again, **_here(ctx, Slots(ranks=(int(m.group(1)),))))
    if (m := _AGAIN_STEP.match(q)) is not None:  # "what about step 6?": the last question on that step
        again = slots_of_edit(ctx.edit) if ctx.intent == "whatif" and ctx.edit else Slots()
        return ctx.intent, dataclasses.replace(again, **_here(ctx, Slots(steps=(int(m.group(1)),))))
    if _WHY.match(q):
        return "why_slow", dataclasses.replace(slots, **_here(ctx, slots))
    referring = bool(_ANAPHOR.search(q))
    if referring and _SAVING.search(q) and edit_for(slots) is None and (ctx.edit or ctx.cause):
        edit = ctx.edit or f"fix {ctx.cause}"
        return "whatif", dataclasses.replace(slots_of_edit(edit), **_here(ctx, slots))
    if referring and _REMEDY.search(q) and not slots.steps:
        return "optimize", dataclasses.replace(slots, **_here(ctx, slots))
    if referring and intent != "out_of_scope" and not slots.steps:
        return intent, dataclasses.replace(slots, **_here(ctx, slots))
    return intent, slots
