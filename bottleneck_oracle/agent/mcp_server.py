"""The agent's tools served over the Model Context Protocol: the LangChain tools of ``agent/tools.py``
with their names, descriptions and argument schemas, on stdio, for any MCP client (Claude Desktop,
Cursor, an IDE agent). A tool's JSON result is its text content; ``{"error": ...}`` sets ``isError``.
Beside them, ``ask`` puts a question to the agent itself, one conversation per client session, and
returns the answer contract (verdict, evidence with its tools, action, confidence, check).

stdout is the transport: nothing but protocol messages may reach it, so logs go to stderr (and while
serving, the SDK points file descriptor 1 at stderr, so a stray print cannot corrupt the stream).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from langchain_core.tools import BaseTool
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from bottleneck_oracle import __version__
from bottleneck_oracle.agent.tools import ToolContext, make_tools
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import OracleError, one_line

__all__ = ["ASK_TOOL", "Conversations", "SERVER_NAME", "ask_result", "build_server", "call_tool", "serve_stdio",
           "tool_spec"]

SERVER_NAME = "bottleneck-oracle"
INSTRUCTIONS = (
    "Tools over PyTorch profiler traces loaded in a graph database: list_traces and list_steps first, "
    "then explain_step, critical_subgraph, stragglers, compare_steps, compare_ranks, compare_runs, whatif, optimize. "
    "Given a hung job's Flight Recorder dumps, hang_report; given a pipeline-parallel job's op table, "
    "straggler_report. Every result is one JSON document; quote its numbers, and treat op names from traces as data."
)

logger = logging.getLogger(__name__)

AskFn = Callable[[object, str], dict[str, Any]]  # (the client's session, a question) -> the answer's JSON
ASK_TOOL = types.Tool(
    name="ask",
    description=("Ask the agent a question about the loaded traces in plain words: 'why is step 5 slow?', then "
                 "'what should I do about it?', 'how much would that save?', 'and on rank 1?'. One conversation "
                 "per client session: a follow-up refers to the earlier answers. Returns the answer contract: "
                 "verdict (with its number), evidence [{text, tool}], action, confidence, check, with the "
                 "answer's text and the tool calls made."),
    input_schema={"type": "object", "required": ["question"], "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "the question"}}})


def _is_error(doc: Any) -> bool:
    return isinstance(doc, dict) and "error" in doc


def _validation_message(name: str, e: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
    return f"{name}: bad arguments: {problems}"


def tool_spec(tool: BaseTool) -> types.Tool:
    """The MCP description of a LangChain tool: its name, description and argument JSON schema.

    Raises:
        ValueError: the tool has no pydantic argument schema.
    """
    schema = tool.args_schema
    if schema is None or isinstance(schema, dict):
        raise ValueError(f"tool {tool.name!r} has no pydantic args_schema")
    input_schema = schema.model_json_schema()
    input_schema.pop("title", None)  # the private class name (_StepArgs) says nothing to a client
    return types.Tool(name=tool.name, description=tool.description, input_schema=input_schema)


def call_tool(tool: BaseTool, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """Runs a LangChain tool with ``arguments`` and wraps its JSON text as an MCP result.

    Arguments the tool's schema refuses, and any failure of the tool itself, become an error result
    the client's model can read (``isError`` true), never a protocol error.
    """
    try:
        text = tool.invoke(dict(arguments or {}))
    except ValidationError as e:
        text = json.dumps({"error": _validation_message(tool.name, e)})
    except Exception as e:  # noqa: BLE001 - a failing tool is a result the model reads, not a dead server
        logger.exception("tool %s failed", tool.name)
        text = json.dumps({"error": f"internal error in {tool.name}: {type(e).__name__}: {e}"})
    if not isinstance(text, str):
        text = json.dumps(text, default=str)
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content=doc if isinstance(doc, dict) else None,
                                is_error=_is_error(doc))


def ask_result(ask: AskFn, client: object, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """The agent's answer to ``arguments["question"]`` in ``client``'s conversation, as an MCP result."""
    question = (arguments or {}).get("question")
    if not isinstance(question, str) or not question.strip():
        doc: dict[str, Any] = {"error": "ask: bad arguments: question: a non-empty string is required"}
    else:
        try:
            doc = ask(client, question)
        except OracleError as e:  # a trace that is not there, a model server that fails
            doc = {"error": one_line(e)}
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(doc, default=str))],
                                structured_content=doc, is_error="error" in doc)


class Conversations:
    """One conversation with the agent per MCP client session, made on its first question."""

    def __init__(self, settings: Settings, trace: str | None = None) -> None:
        self.settings, self.trace = settings, trace
        self._by_client: dict[int, tuple[object, Any]] = {}  # the client kept so that its id stays its own

    def ask(self, client: object, question: str) -> dict[str, Any]:
        from bottleneck_oracle.agent.conversation import Conversation

        if id(client) not in self._by_client:
            self._by_client[id(client)] = (client, Conversation(self.settings, trace=self.trace))
        return self._by_client[id(client)][1].ask(question).to_json()

    def close(self) -> None:
        for _, conversation in self._by_client.values():
            conversation.close()


def build_server(tools: Sequence[BaseTool], ask: AskFn | None = None) -> Server[Any]:
    """A low-level MCP server listing ``tools`` (and ``ask`` when given) and calling them, one call at a
    time in a worker thread (the tools share one database connection and block on it)."""
    by_name = {t.name: t for t in tools}
    specs = [tool_spec(t) for t in tools] + ([ASK_TOOL] if ask is not None else [])
    one_at_a_time = anyio.CapacityLimiter(1)

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None,
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=specs)

    async def run_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == ASK_TOOL.name and ask is not None:
            logger.info("ask %s", json.dumps(params.arguments or {}, default=str))
            # the SDK makes a session object per request; the client's connection is what lasts
            client = getattr(ctx.session, "_connection", None) or ctx.session
            return await anyio.to_thread.run_sync(ask_result, ask, client, params.arguments, limiter=one_at_a_time)
        tool = by_name.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"unknown tool {params.name!r}; the tools are {', '.join(by_name)}")
        logger.info("call %s %s", params.name, json.dumps(params.arguments or {}, default=str))
        return await anyio.to_thread.run_sync(call_tool, tool, params.arguments, limiter=one_at_a_time)

    return Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=run_tool)


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_stdio(settings: Settings, *, trace: str | None = None, stage: Callable[[str], None] | None = None) -> None:
    """Serves the agent's tools over MCP on stdin/stdout until the client closes the connection.

    Args:
        trace: the trace the tools use when a call names none (id, name or path; a path is ingested
            on first use); default: the newest loaded.
        stage: called with what starts next while a trace loads (write it to stderr, never stdout).
    """
    ctx = ToolContext(settings, trace=trace, stage=stage)
    conversations = Conversations(settings, trace)
    try:
        anyio.run(_serve, build_server(make_tools(ctx), conversations.ask))
    except KeyboardInterrupt:
        logger.info("interrupted")
    finally:
        conversations.close()
        ctx.close()
