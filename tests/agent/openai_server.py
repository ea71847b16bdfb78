"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests of the ``openai:`` path.

``ChatServer`` is a real HTTP server (stdlib ``ThreadingHTTPServer``, HTTP/1.1) serving
``POST /v1/chat/completions`` and ``GET /v1/models``. Each completion request takes the next
``Reply`` of its script: an answer, tool calls (arguments sent as given, malformed or not), an
HTTP error with an OpenAI-style body, or a stall longer than the client's time-out. ``stream: true``
is answered with server-sent events: deltas split over several chunks, a usage chunk when
``stream_options.include_usage`` asks for one, then ``data: [DONE]``. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "Reply", "Request", "answer", "http_error", "rate_limited", "stall", "tool_call",
           "unauthorized"]

PIECES = 3  # chunks each streamed content or arguments string is split into


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted reply: an answer (``text``), tool calls (``(name, arguments)`` with arguments as
    the JSON text sent), or, when ``status`` is not 200, an error; ``delay_s`` waits before replying."""

    text: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    status: int = 200
    error: dict[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Request:
    """One request the server received: its method, path, headers and JSON body (None for a GET)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


def answer(text: str) -> Reply:
    """A final answer."""
    return Reply(text=text)


def tool_call(name: str, arguments: dict[str, Any] | str, *more: tuple[str, dict[str, Any] | str]) -> Reply:
    """One or more tool calls; a ``str`` of arguments is sent as written (so it may be malformed)."""
    calls = [(name, arguments), *more]
    return Reply(tool_calls=tuple((n, a if isinstance(a, str) else json.dumps(a)) for n, a in calls))


def http_error(status: int, message: str, kind: str, code: str | None = None,
               headers: Sequence[tuple[str, str]] = ()) -> Reply:
    """An HTTP error with the body OpenAI sends: ``{"error": {"message", "type", "param", "code"}}``."""
    return Reply(status=status, error={"message": message, "type": kind, "param": None, "code": code},
                 headers=tuple(headers))


def unauthorized() -> Reply:
    """A 401 as OpenAI answers a bad key."""
    return http_error(401, "Incorrect API key provided: sk-test. You can find your API key at "
                      "https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")


def rate_limited() -> Reply:
    """A 429 that says to retry at once (``retry-after: 0``; ``retry-after-ms`` keeps the client's wait short)."""
    return http_error(429, "Rate limit reached for test-model: retry later.", "requests", "rate_limit_exceeded",
                      headers=[("retry-after", "0"), ("retry-after-ms", "10")])


def stall(seconds: float, then: Reply | None = None) -> Reply:
    """A reply sent only after ``seconds`` (an answer by default): longer than the client's time-out."""
    base = then or answer("too late")
    return Reply(base.text, base.tool_calls, base.status, base.error, base.headers, seconds)


def _pieces(text: str) -> list[str]:
    size = max(1, -(-len(text) // PIECES))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _is_completion(method: str, path: str) -> bool:
    return method == "POST" and path.rstrip("/") == "/v1/chat/completions"


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}


def _message(reply: Reply, prefix: str) -> dict[str, Any]:
    calls = [{"id": f"{prefix}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
             for i, (n, a) in enumerate(reply.tool_calls)]
    return {"role": "assistant", "content": reply.text, "refusal": None,
            **({"tool_calls": calls} if calls else {})}


def _deltas(reply: Reply, prefix: str) -> Iterator[dict[str, Any]]:
    """The streamed deltas of a reply: role first, then content or tool calls in pieces."""
    if not reply.tool_calls:
        yield {"role": "assistant", "content": ""}
        for piece in _pieces(reply.text or ""):
            yield {"content": piece}
        return
    for i, (name, arguments) in enumerate(reply.tool_calls):
        head = {"index": i, "id": f"{prefix}_{i}", "type": "function",
                "function": {"name": name, "arguments": ""}}
        yield {"role": "assistant", "content": None, "tool_calls": [head]} if i == 0 else {"tool_calls": [head]}
        for piece in _pieces(arguments):
            yield {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _send_json(self, status: int, body: dict[str, Any], headers: Sequence[tuple[str, str]] = ()) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, events: Iterator[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for data in [*(json.dumps(e) for e in events), "[DONE]"]:
            frame = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self) -> None:
        self.server.chat.record(Request("GET", self.path, dict(self.headers), None))
        if self.path.rstrip("/") != "/v1/models":
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        self._send_json(200, {"object": "list", "data": [
            {"id": self.server.chat.model, "object": "model", "created": 0, "owned_by": "tests"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        chat = self.server.chat
        reply = chat.record(Request("POST", self.path, dict(self.headers), body))
        if not _is_completion("POST", self.path):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        if reply is None:
            self._send_json(400, {"error": {"message": f"the script has no reply left for request "
                                            f"{len(chat.completions)}", "type": "invalid_request_error"}},
                            [("x-should-retry", "false")])
            return
        if reply.delay_s and chat.stopping.wait(reply.delay_s):
            self.close_connection = True  # the server is stopping: no reply
            return
        try:
            self._reply(body, reply)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its time-out)
            pass

    def _reply(self, body: dict[str, Any], reply: Reply) -> None:
        if reply.status != 200:
            self._send_json(reply.status, {"error": reply.error}, reply.headers)
            return
        model = body.get("model", self.server.chat.model)
        number = len(self.server.chat.completions)
        prefix = f"call_{number}"  # tool call ids unique across the conversation, as OpenAI's are
        base = {"id": f"chatcmpl-{number}", "created": int(time.time()),
                "model": model, "system_fingerprint": "fp_tests"}
        finish = "tool_calls" if reply.tool_calls else "stop"
        if not body.get("stream"):
            self._send_json(200, {**base, "object": "chat.completion", "usage": _usage(), "choices": [
                {"index": 0, "message": _message(reply, prefix), "finish_reason": finish, "logprobs": None}]})
            return
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        usage: dict[str, Any] = {"usage": None} if with_usage else {}

        def events() -> Iterator[dict[str, Any]]:
            chunk = {**base, "object": "chat.completion.chunk", **usage}
            for delta in _deltas(reply, prefix):
                yield {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}]}
            yield {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish, "logprobs": None}]}
            if with_usage:
                yield {**chunk, "choices": [], "usage": _usage()}

        self._send_events(events())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    chat: ChatServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-reply (a time-out test) is expected, not an error to print


@dataclass
class ChatServer:
    """The server as a context manager: ``with ChatServer([reply, ...]) as s: ... s.url``.

    Args:
        script: the replies, one per ``POST /v1/chat/completions``, in order; more may be appended.
        model: the model ``GET /v1/models`` lists.
    """

    script: list[Reply] = field(default_factory=list)
    model: str = "test-model"
    requests: list[Request] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _httpd: _Server | None = field(default=None, repr=False)
    _next: int = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the client's base URL is this plus ``/v1``)."""
        assert self._httpd is not None, "the server is not running"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def completions(self) -> list[dict[str, Any]]:
        """The bodies of the chat-completions requests received so far, in order."""
        return [r.body for r in self.requests if _is_completion(r.method, r.path) and r.body is not None]

    def record(self, request: Request) -> Reply | None:
        """Records ``request``; for a completion, returns the script's next reply (None when none is left)."""
        with self._lock:
            self.requests.append(request)
            if not _is_completion(request.method, request.path) or self._next >= len(self.script):
                return None
            self._next += 1
            return self.script[self._next - 1]

    def __enter__(self) -> ChatServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.chat = self
        threading.Thread(target=self._httpd.serve_forever, name="chat-server", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
