"""A question to the agent as server-sent events: ``tool`` when a tool call starts, ``tool_done``
when it returns, then ``answer`` (what ``oracle ask --json`` prints) or ``error``; then the end."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import orjson

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import OracleError, one_line

__all__ = ["ask_events", "sse"]

_END = ("end", {})


def sse(event: str, data: object) -> str:
    """One server-sent event whose data is ``data`` as one line of JSON."""
    return f"event: {event}\ndata: {orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()}\n\n"


def ask_events(settings: Settings, question: str, *, trace: str | None, llm: str,
               session: str | None = None) -> Iterator[str]:
    """Starts answering ``question`` about ``trace`` (default: the newest loaded) and returns its events.
    ``session``: the client's conversation, kept in the workspace, so a follow-up refers to the earlier
    answers of that client.

    The agent is built and the trace resolved before this returns, so that a bad model name or a
    trace that is not there fails the request itself; the question is then answered in a thread of
    its own, which closes the conversation when done even if nobody reads the events.

    Raises:
        ConfigError: a bad ``llm``, or no trace loaded yet. NotFoundError: ``trace`` is not there.
    """
    from bottleneck_oracle.agent.conversation import Conversation

    conversation = Conversation(settings, trace=trace, llm=llm, session=f"web:{session}" if session else None)
    try:
        conversation.context.resolve()
    except BaseException:
        conversation.close()
        raise
    events: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()

    def progress(kind: str, details: dict[str, Any]) -> None:
        if kind == "tool_call":
            events.put(("tool", {"name": details["name"], "args": details["args"]}))
        elif kind == "tool_result":
            events.put(("tool_done", {"name": details["name"], "ms": details["ms"], "ok": details["ok"]}))

    def run() -> None:
        try:
            events.put(("answer", conversation.ask(question, progress).to_json()))
        except OracleError as e:
            events.put(("error", {"detail": one_line(e)}))
        except Exception as e:  # noqa: BLE001 - the stream ends with the reason, the server goes on
            events.put(("error", {"detail": f"internal error: {type(e).__name__}: {one_line(e)}"}))
        finally:
            conversation.close()
            events.put(_END)

    threading.Thread(target=run, name="oracle-ask", daemon=True).start()

    def stream() -> Iterator[str]:
        while (item := events.get()) != _END:
            yield sse(*item)

    return stream()
