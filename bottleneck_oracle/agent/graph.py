"""The agent as a LangGraph state graph: the model calls tools until it answers, then the grounding
check runs; an answer with numbers no tool returned, or out of the answer contract (no verdict with
a number first, more than five evidence lines), goes back to the model once to be repaired, and
otherwise leaves flagged (``grounded: false`` with the numbers listed, ``contract_problems``).

    START → model ─(tool calls)→ tools → model ─(answer)→ ground ─(repair once)→ model
                                                             └──────────────────→ END
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import invalid_tool_call
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from bottleneck_oracle.agent.context import recent
from bottleneck_oracle.agent.grounding import contract_problems, ungrounded
from bottleneck_oracle.agent.offline import REPAIR_NAME, turn
from bottleneck_oracle.errors import one_line
from bottleneck_oracle.prompts import load

__all__ = ["AgentState", "RECURSION_LIMIT", "build_agent", "system_prompt"]

RECURSION_LIMIT = 24  # graph steps per turn: about ten rounds of tool calls


class AgentState(TypedDict, total=False):
    """The conversation and the grounding check's verdict on the last answer."""

    messages: Annotated[list[AnyMessage], add_messages]
    repairs: int
    grounded: bool
    ungrounded_numbers: list[str]
    contract_problems: list[str]


def system_prompt() -> str:
    return load("system").format(rules=load("rules"))


def _sources(messages: Sequence[AnyMessage]) -> list[str]:
    """What an answer may take numbers from: the questions and the tool results of the last few turns
    (a follow-up may restate an earlier turn's numbers)."""
    return [str(m.content) for m in recent(messages) if isinstance(m, ToolMessage)
            or (isinstance(m, HumanMessage) and m.name != REPAIR_NAME)]


def _tools_answered(messages: Sequence[AnyMessage]) -> bool:
    """Whether a tool of this turn gave a result: only then has the answer a verdict to give."""
    return any(isinstance(m, ToolMessage) and m.status != "error" and not str(m.content).startswith('{"error"')
               for m in turn(messages)[1])


def _problems(missing: list[str], contract: list[str]) -> str:
    lines = [f"- {p}: rewrite it in the form the rules give (rule 8)." for p in contract]
    if missing:
        lines.insert(0, f"- it states numbers that no tool returned in this conversation: {', '.join(missing)}. Use "
                        "only numbers that appear in the tool results above (rounded as shown), or call a tool that "
                        "returns the number you need.")
    return "\n".join(lines)


def _strict(reply: AIMessageChunk) -> AnyMessage:
    """A streamed reply as a message, each tool call whose arguments are not JSON moved to
    ``invalid_tool_calls``: langchain-core's partial-JSON parser reads ``{step: five`` as ``{}``."""
    bad = {}
    for c in reply.tool_call_chunks:
        try:
            json.loads(c.get("args") or "{}")
        except ValueError as e:
            bad[c.get("id")] = invalid_tool_call(name=c.get("name"), args=c.get("args"), id=c.get("id"),
                                                 error=f"{type(e).__name__}: {e}")
    message = message_chunk_to_message(reply)
    if bad and isinstance(message, AIMessage):
        message.tool_calls = [c for c in message.tool_calls if c["id"] not in bad]
        message.invalid_tool_calls = [*message.invalid_tool_calls, *bad.values()]
    return message


def build_agent(model: BaseChatModel, tools: Sequence[BaseTool], checkpointer: Any = None) -> Any:
    """The compiled graph: invoke or stream it with ``{"messages": [HumanMessage(question)]}``."""
    bound = model.bind_tools(list(tools))
    prompt = SystemMessage(system_prompt())

    def call_model(state: AgentState) -> dict[str, Any]:
        messages = [prompt, *state["messages"]]
        if not getattr(model, "streaming", False):
            return {"messages": [bound.invoke(messages)]}
        chunks = list(bound.stream(messages))  # summed here, as invoke would, but keeping the raw arguments
        return {"messages": [_strict(sum(chunks[1:], chunks[0]) if chunks else AIMessageChunk(content=""))]}

    def route_model(state: AgentState) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return "tools"
        if isinstance(last, AIMessage) and last.invalid_tool_calls:
            return "bad_args"
        return "ground"

    def bad_args(state: AgentState) -> dict[str, Any]:
        """Tool calls whose arguments were not JSON: each answered with the error, for the model to retry."""
        last = state["messages"][-1]
        return {"messages": [ToolMessage(json.dumps({"error": f'the arguments of {c.get("name")} are not valid JSON: '
                                                          f'{one_line(c.get("error") or "unparseable")}'}),
                                         tool_call_id=c.get("id") or "", name=c.get("name") or "")
                             for c in last.invalid_tool_calls]}

    def ground(state: AgentState) -> dict[str, Any]:
        answer = str(state["messages"][-1].content)
        missing = ungrounded(answer, _sources(state["messages"]))
        contract = contract_problems(answer) if _tools_answered(state["messages"]) else []
        if (missing or contract) and state.get("repairs", 0) < 1:
            note = load("repair").format(problems=_problems(missing, contract))
            return {"messages": [HumanMessage(note, name=REPAIR_NAME)], "repairs": state.get("repairs", 0) + 1}
        return {"grounded": not missing, "ungrounded_numbers": missing, "contract_problems": contract}

    def route_ground(state: AgentState) -> str:
        last = state["messages"][-1]
        return "model" if isinstance(last, HumanMessage) and last.name == REPAIR_NAME else END

    graph = StateGraph(AgentState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(list(tools), handle_tool_errors=True))
    graph.add_node("ground", ground)
    graph.add_node("bad_args", bad_args)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route_model, ["tools", "bad_args", "ground"])
    graph.add_edge("tools", "model")
    graph.add_edge("bad_args", "model")
    graph.add_conditional_edges("ground", route_ground, ["model", END])
    return graph.compile(checkpointer=checkpointer)
