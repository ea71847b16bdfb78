"""Follow-up questions resolved against the earlier turns' tool calls and results (no database: the
history is written as the agent writes it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bottleneck_oracle.agent.context import REPAIR_NAME, TurnContext, context_of, recent, resolve, slots_of_edit
from bottleneck_oracle.agent.intents import Slots, read_slots
from bottleneck_oracle.agent.planner import edit_for

EXPLAINED = {"trace": "gpt_2rank", "step": 5, "rank": 1, "cause": {"category": "host_pause", "ranks": [1]}}
WHATIF = {"step": 5, "edits": ["fix host_pause"], "best_ms": 32.947}


def _turn(question: str, intent: str, *calls: tuple[str, dict[str, Any], dict[str, Any]]) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage(question)]
    for i, (name, args, data) in enumerate(calls):
        out += [AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"{question}{i}", "type": "tool_call"}]),
                ToolMessage(json.dumps(data), tool_call_id=f"{question}{i}")]
    answer = AIMessage("answer")
    answer.response_metadata["intent"] = intent
    return out + [answer]


WHY = _turn("why is step 5 slow?", "why_slow", ("explain_step", {"step": 5}, EXPLAINED),
            ("whatif", {"edit": "fix host_pause", "step": 5}, WHATIF))
AFTER_WHY = TurnContext(intent="why_slow", trace="gpt_2rank", step=5, rank=None, cause="host_pause",
                        edit="fix host_pause")


def test_the_context_is_the_last_turns_step_cause_edit_and_intent() -> None:
    assert context_of(WHY) == AFTER_WHY
    on_rank = WHY + _turn("and on rank 0?", "why_slow", ("explain_step", {"step": 5, "rank": 0}, EXPLAINED),
                          ("whatif", {"edit": "fix host_pause", "step": 5}, WHATIF))
    assert context_of(on_rank).rank == 0  # the rank the turn asked about, kept through its later rounds
    optimized = on_rank + _turn("what should I change first?", "optimize",
                                ("optimize", {"budget": 1}, {"step": 7, "plan": [{"edit": "fix x step=7"}]}))
    assert context_of(optimized) == TurnContext(intent="optimize", trace="gpt_2rank", step=7, rank=None,
                                                        cause="host_pause", edit="fix x step=7")
    failed = WHY + _turn("why is step 9 slow?", "why_slow", ("explain_step", {"step": 9}, {"error": "no step 9"}))
    assert context_of(failed).step == 5 and context_of([HumanMessage("x", name=REPAIR_NAME)]) == TurnContext()


@pytest.mark.parametrize(("question", "intent", "step", "rank", "edit"), [
    ("What should I do about it?", "optimize", 5, None, None),
    ("How much would that save?", "whatif", 5, None, "fix host_pause"),
    ("and on rank 1?", "why_slow", 5, 1, None),
    ("what about step 6?", "why_slow", 6, None, None),
    ("why?", "why_slow", 5, None, None),
    ("which rank is the straggler there?", "straggler", 5, None, None),
])
def test_follow_ups_resolve_against_the_last_turn(question: str, intent: str, step: int, rank: int | None,
                                                  edit: str | None) -> None:
    got, slots = resolve(question, "out_of_scope" if intent != "straggler" else intent, read_slots(question),
                         AFTER_WHY)
    assert (got, slots.step, slots.rank, edit_for(slots) if got == "whatif" else None) == (intent, step, rank, edit)


def test_questions_that_refer_to_nothing_are_left_as_they_are() -> None:
    q = "What should I change first?"
    assert resolve(q, "optimize", read_slots(q), AFTER_WHY) == ("optimize", read_slots(q))
    q = "why is step 3 slow?"
    assert resolve(q, "why_slow", read_slots(q), AFTER_WHY) == ("why_slow", read_slots(q))
    assert resolve("and on rank 1?", "straggler", read_slots("and on rank 1?"), TurnContext()) == (
        "straggler", read_slots("and on rank 1?"))


@pytest.mark.parametrize("edit", ["fix host_pause", "scale op=allreduce x2", "remove op=allreduce",
                                  "data_parallel=4", "microbatches=8"])
def test_an_edit_reads_back_into_the_slots_that_make_it(edit: str) -> None:
    assert edit_for(slots_of_edit(edit)) == edit
    if not edit.startswith(("data_parallel", "microbatches")):  # optimize's edits carry their step
        assert edit_for(slots_of_edit(f"{edit} step=5")) == edit
    assert slots_of_edit("set op=gemm 3") == Slots()


def test_only_the_last_turns_are_read_back() -> None:
    history = [m for i in range(6) for m in _turn(f"why is step {i} slow?", "why_slow",
                                                      ("explain_step", {"step": i}, EXPLAINED | {"step": i}))]
    kept = recent(history, 2)
    assert [m.content for m in kept if isinstance(m, HumanMessage)] == ["why is step 4 slow?", "why is step 5 slow?"]
    assert recent(history[:3], 4) == history[:3] and context_of(recent(history)).step == 5
