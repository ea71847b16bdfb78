"""Agent fixtures: a workspace whose embedded FalkorDB holds the shipped example, ingested once per
session the way a user does it (``workspace.ingest``), and a conversation over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.workspace.ingest import ingest
from tests.conftest import REAL, REPO, WILD

GPT = REPO / "examples" / "gpt_2rank"  # real 2-rank gloo capture: rank 1 pauses 150 ms in step 5
DLRM = REAL / "param" / "dlrm_8rank_kineto"  # real 8-rank NCCL job
H100 = WILD / "tracelens" / "h100"
QWEN = H100 / "qwen1.5_0.5b_chat" / "trace.json.gz"  # one H100 step, GPU busy most of it (GPU-bound)
BERT = H100 / "bert_small" / "trace.json.gz"  # one H100 step, GPU mostly idle (host-bound)
UNTRACED = REAL / "hta" / "trace_compare_base"  # real: GPU work waits 100+ ms after launch for nothing traced


@pytest.fixture(scope="session")
def agent_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A workspace with gpt_2rank ingested; its server stops at the end of the session."""
    home = tmp_path_factory.mktemp("agent_home")
    ingest([GPT], Settings(home=home, workers=2))
    yield home
    stop_server(home)


@pytest.fixture(scope="session")
def agent_settings(agent_home: Path) -> Settings:
    return Settings(home=agent_home, workers=2)


@pytest.fixture(scope="session")
def conversation(agent_settings: Settings) -> Iterator[object]:
    """One offline conversation over gpt_2rank, shared by the tests that only ask."""
    from bottleneck_oracle.agent.conversation import Conversation

    with Conversation(agent_settings, trace="gpt_2rank") as c:
        yield c


@pytest.fixture(scope="session")
def gpu_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A workspace of its own (the shared one keeps gpt_2rank the newest) with the two H100 traces
    ingested, bert_small last; its server stops at the end of the session."""
    settings = Settings(home=tmp_path_factory.mktemp("gpu_home"), workers=2)
    for path in (QWEN, BERT):
        ingest([path], settings)
    yield settings
    stop_server(settings.home)


@pytest.fixture(scope="session")
def untraced_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A workspace holding HTA's real trace_compare_base, whose GPU work waits over 100 ms after its
    launch, on an idle stream, for nothing the trace holds; its server stops at the end of the session."""
    settings = Settings(home=tmp_path_factory.mktemp("untraced_home"), workers=2)
    ingest([UNTRACED], settings)
    yield settings
    stop_server(settings.home)
