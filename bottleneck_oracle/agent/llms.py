"""The chat models the agent can run with: ``offline`` (the default, no network) and
``openai:MODEL`` through langchain-openai, against OpenAI with ``OPENAI_API_KEY`` or any
OpenAI-compatible server (vLLM, Ollama, llama.cpp) with ``--base-url``."""

from __future__ import annotations

import os

from langchain_core.language_models.chat_models import BaseChatModel

from bottleneck_oracle.agent.offline import OfflinePlanner
from bottleneck_oracle.errors import ConfigError

__all__ = ["DEFAULT_LLM", "chat_model"]

DEFAULT_LLM = "offline"


def chat_model(spec: str = DEFAULT_LLM, *, base_url: str | None = None, api_key: str | None = None,
               timeout: float = 60.0, max_retries: int = 2, streaming: bool = True,
               pipeline_job: bool = False) -> BaseChatModel:
    """The chat model ``spec`` names.

    Args:
        pipeline_job: the offline planner reads questions as about a pipeline job's op table (no trace).
        base_url: an OpenAI-compatible server's ``/v1`` URL; with it no key is needed.
        timeout: seconds one request may take before it fails.
        max_retries: retries of a failed request (a 429 or 5xx waits as the server says).

    Raises:
        ConfigError: an unknown spec, or ``openai:`` without a key and without a base URL.
    """
    if spec == "offline":
        return OfflinePlanner(pipeline_job=pipeline_job)
    kind, _, model = spec.partition(":")
    if kind != "openai" or not model:
        raise ConfigError(f"--llm {spec!r}: expected 'offline' or 'openai:MODEL' (with --base-url for a "
                          "compatible server)")
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key and not base_url:
        raise ConfigError(f"--llm {spec}: set OPENAI_API_KEY, or give --base-url for an OpenAI-compatible server")
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, api_key=key or "none", base_url=base_url, timeout=timeout,
                      max_retries=max_retries, temperature=0, streaming=streaming)
