"""The offline planner as a LangChain chat model: no network, no key, deterministic. Given the
conversation it either asks for the next round of tool calls (``agent/planner.py``) or writes the
answer from the templates over this turn's tool results (``agent/answers.py``), so the same
LangGraph agent runs with it or with a real model."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from bottleneck_oracle.agent.answers import missing_tools, write_reply
from bottleneck_oracle.agent.context import REPAIR_NAME, context_of, recent, resolve
from bottleneck_oracle.agent.intents import ON_PIPELINE, classify, read_slots
from bottleneck_oracle.agent.planner import Result, next_calls

__all__ = ["OfflinePlanner", "REPAIR_NAME", "turn"]


def turn(messages: Sequence[BaseMessage]) -> tuple[str, list[BaseMessage]]:
    """The question of the current turn (the last message a person sent, not the grounding check's)
    and the messages after it."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, HumanMessage) and m.name != REPAIR_NAME:
            return str(m.content), list(messages[i + 1:])
    return "", list(messages)


def turn_results(after: Sequence[BaseMessage]) -> list[Result]:
    """The tool calls of this turn with their parsed results, in the order they were made."""
    calls = {c["id"]: c for m in after if isinstance(m, AIMessage) for c in m.tool_calls}
    out = []
    for m in after:
        if isinstance(m, ToolMessage) and m.tool_call_id in calls:
            try:
                data = json.loads(str(m.content))
            except ValueError:
                data = {"error": str(m.content)}
            call = calls[m.tool_call_id]
            out.append(Result(call["name"], dict(call["args"]), data if isinstance(data, dict) else {"rows": data}))
    return out


class OfflinePlanner(BaseChatModel):
    """A chat model that plans tool calls by intent and answers from templates. ``pipeline_job``: the
    conversation is about a pipeline job's op table and no trace, so a question about stragglers, a rank's
    what-if or the job's slowness is its straggler analysis (``intents.ON_PIPELINE``)."""

    pipeline_job: bool = False

    @property
    def _llm_type(self) -> str:
        return "bottleneck-oracle-offline"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[Any, AIMessage]:
        names = [t.name if isinstance(t, BaseTool) else str(t) for t in tools]
        return self.bind(tool_names=names, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        question, after = turn(messages)
        intent = classify(question).name if question.strip() else "out_of_scope"
        # the earlier turns' step, rank, cause and edit resolve "it", "that", "and on rank 1?"
        context = context_of(recent(messages[:len(messages) - len(after) - 1]) if question else [])
        intent, slots = resolve(question, intent, read_slots(question), context)
        if self.pipeline_job and intent in ON_PIPELINE:
            intent = "stragglers"
        results = turn_results(after)
        available = set(kwargs.get("tool_names") or ())
        calls = next_calls(intent, slots, question, results)
        missing = sorted({c.name for c in calls or () if available and c.name not in available})
        if missing:
            message = AIMessage(content=missing_tools(missing))
        elif calls:
            message = AIMessage(content="", tool_calls=[
                {"name": c.name, "args": c.args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
                for c in calls])
        else:  # the short answer is the message; the contract's fields travel with it
            reply = write_reply(intent, slots, results, trace=context.trace)
            message = AIMessage(content=reply.render())
            message.response_metadata["reply"] = reply.to_json() | {"details": reply.details}
        message.response_metadata["intent"] = intent
        return ChatResult(generations=[ChatGeneration(message=message)])
