"""``oracle mcp``: the agent's tools over the Model Context Protocol, driven by the real ``mcp`` client
through stdio against ``python -m bottleneck_oracle mcp`` on a workspace where gpt_2rank is loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.shared.exceptions import MCPError

from bottleneck_oracle.agent.tools import TOOL_NAMES
from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.workspace.ingest import ingest
from tests.conftest import REPO, STRAGGLERS

GPT = REPO / "examples" / "gpt_2rank"  # real 2-rank gloo capture: rank 1 pauses 150 ms in step 5
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "steps": ("list_steps", {}),
    "step5": ("explain_step", {"step": 5}),
    "step42": ("explain_step", {"step": 42}),
    "bad_args": ("explain_step", {"step": "five"}),
    "ask_why": ("ask", {"question": "Why is step 5 slow?"}),  # then two follow-ups in the same session
    "ask_do": ("ask", {"question": "What should I do about it?"}),
    "ask_save": ("ask", {"question": "How much would that save?"}),
    "ask_empty": ("ask", {"question": " "}),
    "pipeline": ("straggler_report", {"pipeline": str(STRAGGLERS / "ST"), "whatif": ["move_layer 3->0 layers=8"]}),
    "no_pipeline": ("straggler_report", {}),
}


@dataclass
class Served:
    """What one MCP session with the server saw."""

    init: types.InitializeResult
    tools: list[types.Tool]
    results: dict[str, types.CallToolResult]
    unknown_tool: MCPError | None
    stream_faults: list[Exception] = field(default_factory=list)
    stderr: str = ""


async def _session(home: Path, errlog: Any) -> Served:
    faults: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):  # a line on the server's stdout that is not JSON-RPC
            faults.append(message)

    params = StdioServerParameters(command=sys.executable, args=["-m", "bottleneck_oracle", "mcp"], cwd=REPO,
                                   env={"ORACLE_HOME": str(home), "PYTHONPATH": str(REPO)})
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=240, message_handler=on_message) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            results = {key: await session.call_tool(name, args) for key, (name, args) in CALLS.items()}
            try:
                await session.call_tool("no_such_tool", {})
                unknown = None
            except MCPError as e:
                unknown = e
    return Served(init, tools, results, unknown, faults)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One session against a workspace with gpt_2rank ingested; its server stops at the end."""
    home = tmp_path_factory.mktemp("mcp_home")
    try:
        ingest([GPT], Settings(home=home, workers=2))
        log = home / "mcp_stderr.log"
        with log.open("w") as errlog:
            out = anyio.run(_session, home, errlog)
        out.stderr = log.read_text()
        yield out
    finally:
        stop_server(home)


def _doc(result: types.CallToolResult) -> dict[str, Any]:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return json.loads(result.content[0].text)


def test_mcp_initialize_names_the_server_and_offers_tools(served: Served) -> None:
    assert served.init.server_info.name == "bottleneck-oracle"
    assert served.init.capabilities.tools is not None
    assert served.init.instructions and "list_steps" in served.init.instructions


def test_mcp_lists_every_tool_with_its_description_and_schema(served: Served) -> None:
    by_name = {t.name: t for t in served.tools}
    assert sorted(by_name) == sorted([*TOOL_NAMES, "ask"]) and by_name["ask"].input_schema["required"] == ["question"]
    for tool in served.tools:
        assert tool.description and tool.input_schema["type"] == "object", tool.name
    props = {name: set(t.input_schema.get("properties", {})) for name, t in by_name.items()}
    assert props["explain_step"] == {"step", "rank", "trace"}
    assert props["list_traces"] == set()
    assert props["compare_steps"] == {"step_a", "step_b", "rank", "trace"}
    assert set(by_name["compare_steps"].input_schema["required"]) == {"step_a", "step_b"}
    assert props["whatif"] == {"edit", "step", "trace"} and by_name["whatif"].input_schema["required"] == ["edit"]
    assert props["cypher"] == {"query", "params"}
    assert by_name["critical_subgraph"].input_schema["properties"]["hops"]["maximum"] == 3


def test_mcp_list_steps_returns_the_tools_json(served: Served) -> None:
    result = served.results["steps"]
    doc = _doc(result)
    assert not result.is_error and result.structured_content == doc
    assert doc["trace"] == "gpt_2rank" and doc["ranks"] == 2
    assert 5 in [s["step"] for s in doc["steps"]]
    assert {(s["step"], s["rank"]) for s in doc["slow_steps"]} >= {(5, 1)}


def test_mcp_explain_step_finds_the_host_pause_of_step_5(served: Served) -> None:
    result = served.results["step5"]
    doc = _doc(result)
    assert not result.is_error
    assert (doc["step"], doc["rank"], doc["wall_ms"], doc["slow"]) == (5, 1, 179.484, True)
    assert doc["cause"]["category"] == "host_pause"


def test_mcp_explain_missing_step_is_an_error_naming_the_steps(served: Served) -> None:
    result = served.results["step42"]
    doc = _doc(result)
    assert result.is_error and set(doc) == {"error"}
    steps = [s["step"] for s in _doc(served.results["steps"])["steps"]]
    assert "step 42" in doc["error"] and ", ".join(map(str, steps)) in doc["error"]


def test_mcp_bad_arguments_are_an_error_result(served: Served) -> None:
    result = served.results["bad_args"]
    assert result.is_error
    assert "explain_step: bad arguments: step" in _doc(result)["error"]


def test_mcp_ask_answers_in_the_contract_and_keeps_the_clients_conversation(served: Served) -> None:
    why, do, save = (_doc(served.results[k]) for k in ("ask_why", "ask_do", "ask_save"))
    assert not any(served.results[k].is_error for k in ("ask_why", "ask_do", "ask_save"))
    assert served.results["ask_why"].structured_content == why
    assert why["verdict"].startswith("Step 5 is slow because") and why["cause"]["category"] == "host_pause"
    assert why["evidence"] and all(e["tool"] for e in why["evidence"]) and why["action"] and why["check"]
    assert [(c["name"], c["args"]) for c in do["tool_calls"]] == [("optimize", {"step": 5, "budget": 1})], do
    assert [(c["name"], c["args"]) for c in save["tool_calls"]] == [("whatif", {"edit": "fix host_pause", "step": 5})]
    assert save["suggestions"][0]["gain_ms"] == why["suggestions"][0]["gain_ms"] and save["grounded"]
    empty = served.results["ask_empty"]
    assert empty.is_error and "question" in _doc(empty)["error"]


def test_mcp_unknown_tool_is_a_protocol_error(served: Served) -> None:
    assert served.unknown_tool is not None
    assert "no_such_tool" in served.unknown_tool.message and "explain_step" in served.unknown_tool.message


def test_mcp_straggler_report_reads_a_pipeline_job_it_is_given(served: Served) -> None:
    result = served.results["pipeline"]
    doc = _doc(result)
    assert not result.is_error and doc["pipeline"] == str(STRAGGLERS / "ST") and doc["cause"] == "stage_imbalance"
    assert doc["headline"].startswith("Stage 3 is the long stage") and doc["fixes"][0]["stage"] == 3
    assert doc["whatif"][0]["edits"] == ["move_layer 3->0 layers=8"] and "step_times_s" not in doc
    missing = served.results["no_pipeline"]
    assert missing.is_error and "pass --pipeline" in _doc(missing)["error"]


def test_mcp_stdout_carries_only_the_protocol(served: Served) -> None:
    assert served.stream_faults == []
    assert "call explain_step" in served.stderr  # the server logs each call, on stderr


def test_mcp_sdk_is_not_imported_by_the_cli_app() -> None:
    code = ("import sys, bottleneck_oracle.cli.app\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp' or m.endswith('mcp_server')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
