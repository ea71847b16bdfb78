"""Choosing the chat model: offline by default, OpenAI or a compatible server by flag."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from bottleneck_oracle.agent.llms import chat_model
from bottleneck_oracle.agent.offline import OfflinePlanner
from bottleneck_oracle.errors import ConfigError


def test_offline_is_the_default() -> None:
    assert isinstance(chat_model(), OfflinePlanner)


def test_a_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = chat_model("openai:llama3", base_url="http://127.0.0.1:9/v1", timeout=3, max_retries=1)
    assert isinstance(model, ChatOpenAI) and model.model_name == "llama3" and model.max_retries == 1
    assert str(model.openai_api_base).startswith("http://127.0.0.1:9")


def test_bad_specs_and_a_missing_key_are_one_line_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        chat_model("openai:gpt-4o")
    with pytest.raises(ConfigError, match="expected 'offline'"):
        chat_model("claude")
