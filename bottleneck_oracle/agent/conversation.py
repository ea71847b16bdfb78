"""A conversation with the agent: a question in, an ``Answer`` out, with the tool calls it made,
the cause, evidence and suggestions taken from those tools' results (never from the model's words),
and the grounding check's verdict. ``session`` keeps the conversation in the workspace (SQLite) so
that ``oracle chat --session NAME`` resumes it."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from bottleneck_oracle.agent.answers import remedies_first
from bottleneck_oracle.agent.graph import RECURSION_LIMIT, build_agent
from bottleneck_oracle.agent.llms import DEFAULT_LLM, chat_model
from bottleneck_oracle.agent.offline import turn, turn_results
from bottleneck_oracle.agent.planner import Result
from bottleneck_oracle.agent.reply import Reply, parse_reply
from bottleneck_oracle.agent.tools import ToolContext, args_key, make_tools
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ModelError, one_line

__all__ = ["Answer", "Conversation", "ask"]

SESSIONS_NAME = "conversations.sqlite"
Event = Callable[[str, dict[str, Any]], None]  # (kind, details): "tool_call", "tool_result", "repair"


@dataclass
class Answer:
    """What ``oracle ask --json`` prints."""

    question: str
    answer: str
    answered: bool
    reason: str | None
    step: int | None
    cause: dict[str, Any] | None
    suggestions: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    llm: str
    grounded: bool
    ungrounded_numbers: list[str]
    intent: str | None = None
    seconds: float = 0.0
    # the answer contract (agent/reply.py): the verdict, evidence lines {text, tool}, what to do, how
    # sure, the command that checks it, and what the short answer leaves out
    verdict: str = ""
    evidence: list[dict[str, str]] = field(default_factory=list)
    action: str | None = None
    confidence: str | None = None
    check: str | None = None
    details: list[str] = field(default_factory=list)
    contract_problems: list[str] = field(default_factory=list)  # how the answer breaks the contract, if it does
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra")
        return out

    def reply(self) -> Reply:
        return Reply.from_json(self.to_json())

    def render(self, verbose: bool = False) -> str:
        """The answer as printed: the contract's short form, or everything with ``verbose``."""
        return self.reply().render(verbose) if self.verdict else self.answer


def _reply_of(message: Any) -> Reply:
    """The contract's fields of the final message: the offline planner's own, or a model's text read back."""
    if not isinstance(message, AIMessage):
        return Reply("")
    doc = message.response_metadata.get("reply")
    return Reply.from_json(doc) if isinstance(doc, dict) else parse_reply(str(message.content))


def _structured(results: list[Result]) -> dict[str, Any]:
    """Step, cause and suggestions, read from this turn's tool results."""
    ok = {r.name: r.data for r in results if r.ok}
    explained = ok.get("explain_step")
    step = next((d.get(k) for d in ok.values() for k in ("step", "step_b") if isinstance(d.get(k), int)), None)
    cause = None
    if explained is not None:
        c = explained.get("cause")
        cause = ({"category": c["category"], "ranks": c["ranks"], "ops": c["ops"], "impact_ms": c["impact_ms"]}
                 if c else {"category": "none", "ranks": [], "ops": [], "impact_ms": None})
    elif ok.get("compare_runs") is not None:  # two runs: the diff's cause (workspace/diff.py cause_of)
        cause = ok["compare_runs"].get("cause")
    category = (cause or {}).get("category")
    remedy = next((e["title"] for e in remedies_first(ok.get("playbook_search"), category)), None)
    suggestions = []
    if "whatif" in ok:
        w = ok["whatif"]
        suggestions.append({"remedy": remedy or w["edits"][0], "edit": "; ".join(w["edits"]),
                            "predicted_ms": w["best_ms"],
                            "gain_ms": w["gain_ms"], "predictor": w["chosen"]})
    plan = ok.get("optimize", {}).get("plan", [])
    for p in plan:
        remedies = next((c["remedies"] for c in ok["optimize"]["candidates"] if c["edit"] == p["edit"]), [])
        suggestions.append({"remedy": remedies[0] if remedies else p["category"], "edit": p["edit"],
                            "predicted_ms": p["predicted_ms"], "gain_ms": p["gain_ms"], "predictor": p["predictor"]})
    planned = {p["edit"] for p in plan}
    for c in ok.get("optimize", {}).get("candidates", []):  # the rest, each predicted alone
        if c["edit"] not in planned and (c["gain_ms"] or 0) > 0:
            suggestions.append({"remedy": c["remedies"][0] if c["remedies"] else c["category"], "edit": c["edit"],
                                "predicted_ms": c["predicted_ms"], "gain_ms": c["gain_ms"],
                                "predictor": c["predictor"]})
    return {"step": step, "cause": cause, "suggestions": suggestions}


class Conversation:
    """One conversation: the agent built once, its tools' database connection kept open.

    Args:
        trace: the trace asked about (id, name or path; default: the newest loaded).
        llm: ``offline`` or ``openai:MODEL``.
        base_url: an OpenAI-compatible server.
        session: a name to keep the conversation under (SQLite in the workspace); None: in memory.
        dumps: a hung job's Flight Recorder dumps (``oracle ask --dumps``).
        pipeline: a pipeline job's op table (``oracle ask --pipeline``); with no trace and no dumps, questions
            about stragglers, a rank or the job's slowness are about it.
    """

    def __init__(self, settings: Settings, *, trace: str | None = None, llm: str = DEFAULT_LLM,
                 base_url: str | None = None, session: str | None = None, model: Any = None,
                 stage: Callable[[str], None] | None = None, dumps: str | None = None,
                 pipeline: str | None = None) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        self.settings, self.llm = settings, llm
        self.context = ToolContext(settings, trace=trace, dumps=dumps, pipeline=pipeline, stage=stage)
        self.tools = make_tools(self.context)
        self._connection: sqlite3.Connection | None = None
        if session:
            from langgraph.checkpoint.sqlite import SqliteSaver

            Path(settings.home).mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(Path(settings.home) / SESSIONS_NAME, check_same_thread=False)
            checkpointer: Any = SqliteSaver(self._connection)
        else:
            checkpointer = InMemorySaver()
        self.thread = session or uuid.uuid4().hex
        only_pipeline = pipeline is not None and trace is None and dumps is None
        model = model or chat_model(llm, base_url=base_url, pipeline_job=only_pipeline)
        self.agent = build_agent(model, self.tools, checkpointer)

    def history(self) -> list[tuple[str, str]]:
        """The (question, answer) pairs of this conversation so far."""
        state = self.agent.get_state(self._config()).values
        pairs, question = [], None
        for m in state.get("messages", []):
            if isinstance(m, HumanMessage) and m.name is None:
                question = str(m.content)
            elif isinstance(m, AIMessage) and not m.tool_calls and question is not None and m.content:
                pairs.append((question, str(m.content)))
        return pairs

    def reset(self) -> None:
        """Starts the conversation over (a new thread under the same session name)."""
        self.thread = f"{self.thread.split('#')[0]}#{uuid.uuid4().hex[:8]}"

    def set_trace(self, trace: str | None) -> None:
        self.context.trace = trace

    def _config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread}, "recursion_limit": RECURSION_LIMIT}

    def ask(self, question: str, on_event: Event | None = None) -> Answer:
        """Answers ``question``.

        Raises:
            ModelError: the chat model's server failed (the message says how).
        """
        tell = on_event or (lambda *_: None)
        start = time.perf_counter()
        calls: dict[str, dict[str, Any]] = {}
        self.context.timings.clear()
        try:
            for update in self.agent.stream({"messages": [HumanMessage(question)], "repairs": 0}, self._config(),
                                            stream_mode="updates"):
                for node, change in update.items():
                    for m in (change or {}).get("messages", []):
                        if isinstance(m, AIMessage):
                            for c in m.tool_calls:
                                calls[c["id"]] = {"name": c["name"], "args": c["args"]}
                                tell("tool_call", {"name": c["name"], "args": c["args"]})
                        elif isinstance(m, ToolMessage) and m.tool_call_id in calls:
                            call = calls[m.tool_call_id]
                            # a tool that ran reports its own time; arguments refused before it ran took none
                            call["ms"] = _took(self.context.timings, call)
                            call["ok"] = m.status != "error" and not str(m.content).startswith('{"error"')
                            tell("tool_result", {"name": call["name"], "ms": call["ms"], "ok": call["ok"]})
                        elif isinstance(m, HumanMessage) and node == "ground":
                            tell("repair", {"text": str(m.content)})
        except Exception as e:
            raise _model_error(e) from e
        state = self.agent.get_state(self._config()).values
        messages = state["messages"]
        question_text, after = turn(messages)
        results = turn_results(after)
        final = messages[-1]
        text = str(final.content) if isinstance(final, AIMessage) else ""
        answered = any(r.ok for r in results) and not text.lower().startswith("i cannot answer") and bool(text)
        reason = None
        if not answered:
            errors = [r.data["error"] for r in results if not r.ok]
            reason = errors[0] if errors else (text or "the model gave no answer")
        reply = _reply_of(final)
        return Answer(
            question=question, answer=text, verdict=reply.verdict,
            evidence=reply.to_json()["evidence"], action=reply.action, confidence=reply.confidence,
            check=reply.check, details=reply.details, answered=answered, reason=reason, **_structured(results),
            tool_calls=[{"name": c["name"], "args": c["args"], "ms": c.get("ms"), "ok": c.get("ok", False)}
                        for c in calls.values()],
            llm=self.llm, grounded=bool(state.get("grounded", False)),
            ungrounded_numbers=list(state.get("ungrounded_numbers", [])),
            contract_problems=list(state.get("contract_problems", [])),
            intent=final.response_metadata.get("intent") if isinstance(final, AIMessage) else None,
            seconds=round(time.perf_counter() - start, 3),
            extra={"results": [{"name": r.name, "args": r.args, "data": r.data} for r in results]},
        )

    def close(self) -> None:
        self.context.close()
        if self._connection is not None:
            self._connection.close()

    def __enter__(self) -> Conversation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _took(timings: list[tuple[str, str, float]], call: dict[str, Any]) -> float | None:
    """The time the tool of ``call`` recorded (the first record of that tool with these arguments,
    else of that tool), taken once; None when it never ran."""
    key = (call["name"], args_key(call["args"]))
    for i, (name, args, ms) in sorted(enumerate(timings), key=lambda t: (t[1][:2] != key, t[0])):
        if name == call["name"]:
            del timings[i]
            return ms
    return None


def _model_error(e: Exception) -> Exception:
    """A failure of the model's server as one line; anything else unchanged."""
    from langgraph.errors import GraphRecursionError

    if isinstance(e, GraphRecursionError):
        return ModelError(f"the agent made more than {RECURSION_LIMIT} steps without answering")
    try:
        import openai
    except ImportError:
        return e
    if isinstance(e, openai.AuthenticationError):
        return ModelError(f"the chat model's server refused the API key (401): {one_line(e)}")
    if isinstance(e, openai.RateLimitError):
        return ModelError(f"the chat model's server kept refusing for the rate limit (429) after retries: "
                          f"{one_line(e)}")
    if isinstance(e, openai.APITimeoutError):
        return ModelError("the chat model's server did not answer in time")
    if isinstance(e, openai.APIConnectionError):
        return ModelError(f"cannot reach the chat model's server: {one_line(e)}")
    if isinstance(e, openai.APIError):
        return ModelError(f"the chat model's server failed: {one_line(e)}")
    return e


def ask(question: str, settings: Settings, *, trace: str | None = None, llm: str = DEFAULT_LLM,
        base_url: str | None = None, on_event: Event | None = None) -> Answer:
    """One question, one answer, nothing kept."""
    with Conversation(settings, trace=trace, llm=llm, base_url=base_url) as conversation:
        return conversation.ask(question, on_event)
