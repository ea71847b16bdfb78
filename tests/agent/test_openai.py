"""The ``openai:`` path end to end: the real langchain-openai client against a scripted
chat-completions server on 127.0.0.1 (``tests/agent/openai_server.py``), the real LangGraph agent
and its tools over the shipped 2-rank capture in an embedded FalkorDB (step 5 is slow on rank 1:
179.484 ms against a median of 32.948 ms)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_openai import ChatOpenAI

from bottleneck_oracle.agent.conversation import Answer, Conversation
from bottleneck_oracle.agent.llms import chat_model
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ModelError
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.workspace.ingest import ingest
from tests.agent.openai_server import ChatServer, Reply, answer, rate_limited, stall, tool_call, unauthorized
from tests.conftest import REPO

GPT = REPO / "examples" / "gpt_2rank"
LLM = "openai:test-model"
QUESTION = "Why is step 5 slow?"
EXPLAIN = tool_call("explain_step", {"step": 5})
GROUNDED = "Step 5 took 179.484 ms on rank 1 against a median step of 32.948 ms: a host pause."
STREAMING = pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A workspace with the 2-rank capture ingested, its embedded FalkorDB stopped at the end. Not the
    conftest's ``agent_settings``: without embeddings and predictions (which explain_step does not
    read) the ingest takes 3 s instead of 26 s."""
    home = tmp_path_factory.mktemp("openai_home")
    s = Settings(home=home, workers=2)
    ingest([GPT], s, predict=False, memory=False)
    yield s
    stop_server(Path(home))


def _ask(settings: Settings, script: list[Reply], **model: Any) -> tuple[Answer, ChatServer]:
    """One question through a Conversation whose model is ``chat_model(LLM, **model)`` on a fresh server."""
    with ChatServer(script) as server:
        llm = chat_model(LLM, base_url=server.url + "/v1", **model)
        with Conversation(settings, llm=LLM, model=llm) as conversation:
            return conversation.ask(QUESTION), server


def _tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


@STREAMING
def test_ask_tool_call_then_grounded_answer(settings: Settings, streaming: bool) -> None:
    a, server = _ask(settings, [EXPLAIN, answer(GROUNDED)], streaming=streaming)
    assert a.answer == GROUNDED
    assert a.answered and a.grounded and a.ungrounded_numbers == []
    assert [(c["name"], c["args"], c["ok"]) for c in a.tool_calls] == [("explain_step", {"step": 5}, True)]
    assert a.step == 5 and a.cause is not None and a.cause["category"] == "host_pause" and a.llm == LLM
    first, second = server.completions
    assert [bool(b.get("stream")) for b in (first, second)] == [streaming, streaming]
    assert first["model"] == "test-model" and first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": QUESTION}
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert "explain_step" in schemas and "step" in schemas["explain_step"]["properties"]
    call = second["messages"][-2]["tool_calls"][0]
    assert call["function"] == {"name": "explain_step", "arguments": json.dumps({"step": 5})}
    [result] = _tool_messages(second)
    assert result["tool_call_id"] == call["id"]
    data = json.loads(result["content"])
    assert data["step"] == 5 and data["rank"] == 1 and data["wall_ms"] == 179.484 and data["median_ms"] == 32.948


def test_ask_number_no_tool_returned_is_flagged(settings: Settings) -> None:
    wrong = "Step 5 takes 999.9 ms."
    a, server = _ask(settings, [EXPLAIN, answer(wrong), answer(wrong)])
    assert len(server.completions) == 3
    repair = server.completions[2]["messages"][-1]
    assert repair["role"] == "user" and repair["name"] == "grounding_check" and "999.9" in repair["content"]
    assert server.completions[2]["messages"][-2] == {"role": "assistant", "content": wrong}
    assert a.answer == wrong and a.grounded is False and a.ungrounded_numbers == ["999.9"]


def test_ask_repaired_answer_is_grounded(settings: Settings) -> None:
    a, server = _ask(settings, [EXPLAIN, answer("Step 5 takes 999.9 ms."), answer(GROUNDED)], streaming=False)
    assert "999.9" in server.completions[2]["messages"][-1]["content"]
    assert a.answer == GROUNDED and a.grounded is True and a.ungrounded_numbers == []


def test_ask_401_is_a_one_line_model_error(settings: Settings) -> None:
    with ChatServer([unauthorized()]) as server:
        with Conversation(settings, llm=LLM, base_url=server.url + "/v1") as conversation:
            with pytest.raises(ModelError) as caught:
                conversation.ask(QUESTION)
    message = str(caught.value)
    assert "401" in message and "\n" not in message
    assert len(server.completions) == 1  # a refused key is not retried


def test_ask_429_then_success_is_retried(settings: Settings) -> None:
    with ChatServer([rate_limited(), EXPLAIN, answer(GROUNDED)]) as server:
        with Conversation(settings, llm=LLM, base_url=server.url + "/v1") as conversation:
            a = conversation.ask(QUESTION)
    assert a.answer == GROUNDED and a.answered and a.grounded
    first, retried, _ = server.completions
    assert retried == first  # the first model call of the turn took two requests: the 429, then its retry


@pytest.mark.slow  # it bounds wall time: in the serial set, away from the parallel suite's load
def test_ask_server_too_slow_is_a_timeout(settings: Settings) -> None:
    start = time.perf_counter()
    with ChatServer([stall(10)]) as server:
        llm = chat_model(LLM, base_url=server.url + "/v1", timeout=1, max_retries=0)
        with Conversation(settings, llm=LLM, model=llm) as conversation:
            with pytest.raises(ModelError) as caught:
                conversation.ask(QUESTION)
    assert "did not answer in time" in str(caught.value)
    assert len(server.completions) == 1 and time.perf_counter() - start < 8


@STREAMING
@pytest.mark.parametrize("arguments", ["{step: five", '{"step": "5"'], ids=["unquoted", "unclosed"])
def test_ask_malformed_arguments_answered_with_error(settings: Settings, streaming: bool, arguments: str) -> None:
    script = [tool_call("explain_step", arguments), EXPLAIN, answer(GROUNDED)]
    a, server = _ask(settings, script, streaming=streaming)
    assert len(server.completions) == 3
    bad_call = server.completions[1]["messages"][-2]["tool_calls"][0]
    assert bad_call["function"]["arguments"] == arguments
    [error] = _tool_messages(server.completions[1])
    assert error["tool_call_id"] == bad_call["id"] and "not valid JSON" in json.loads(error["content"])["error"]
    assert a.answer == GROUNDED and a.answered and a.grounded
    assert [(c["name"], c["args"], c["ok"]) for c in a.tool_calls] == [("explain_step", {"step": 5}, True)]


def test_ask_wrong_argument_type_comes_back_as_message(settings: Settings) -> None:
    reply = "explain_step needs the step as a whole number; ask again with one."
    a, server = _ask(settings, [tool_call("explain_step", {"step": "five"}), answer(reply)])
    [error] = _tool_messages(server.completions[1])
    assert error["tool_call_id"] == server.completions[1]["messages"][-2]["tool_calls"][0]["id"]
    assert "step" in error["content"] and "valid integer" in error["content"]
    assert a.answer == reply and not a.answered
    assert [(c["name"], c["ok"]) for c in a.tool_calls] == [("explain_step", False)]


def test_chat_server_streams_usage_and_lists_models() -> None:
    with ChatServer([answer("Hello from the test server.")]) as server:
        llm = ChatOpenAI(model="test-model", base_url=server.url + "/v1", api_key="none", streaming=True,
                         stream_usage=True, max_retries=0)
        reply = llm.invoke("hello")
        models = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0).models.list()
    assert reply.content == "Hello from the test server."
    assert reply.usage_metadata is not None and reply.usage_metadata["total_tokens"] == 132
    assert server.completions[0]["stream_options"] == {"include_usage": True}
    assert [m.id for m in models.data] == ["test-model"]


def test_an_answer_without_a_verdict_first_is_sent_back_once_for_the_contract(settings: Settings) -> None:
    loose = "A host pause made it slow.\nStep 5 took 179.484 ms on rank 1."
    a, server = _ask(settings, [EXPLAIN, answer(loose), answer(GROUNDED)], streaming=False)
    repair = server.completions[2]["messages"][-1]
    assert repair["name"] == "grounding_check" and "first line is not a verdict with a number" in repair["content"]
    assert a.answer == GROUNDED and a.verdict == GROUNDED and a.contract_problems == [] and a.grounded


def test_a_follow_up_sees_the_earlier_turns_and_may_quote_their_numbers(settings: Settings) -> None:
    save = "Fixing the host pause saves 146.537 ms on step 5 (predictor: replay).\nDo: fix host_pause"
    restated = "Step 5 took 179.484 ms on rank 1 against a median step of 32.948 ms."
    script = [EXPLAIN, answer(GROUNDED), tool_call("whatif", {"edit": "fix host_pause", "step": 5}), answer(save),
              answer(restated)]
    with ChatServer(script) as server:
        with Conversation(settings, llm=LLM, model=chat_model(LLM, base_url=server.url + "/v1")) as conversation:
            conversation.ask(QUESTION)
            saved = conversation.ask("How much would that save?")
            again = conversation.ask("why?")
    follow_up = server.completions[2]["messages"]
    assert "a follow-up refers to them" in follow_up[0]["content"]  # the system prompt says the history is there
    assert [m["role"] for m in follow_up[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert follow_up[1]["content"] == QUESTION and follow_up[4]["content"] == GROUNDED
    assert follow_up[-1]["content"] == "How much would that save?"
    assert saved.grounded and saved.action == "fix host_pause" and saved.tool_calls[0]["name"] == "whatif"
    assert again.tool_calls == [] and again.grounded and len(server.completions) == 5  # numbers of earlier turns
