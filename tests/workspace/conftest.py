"""The agent's workspace (gpt_2rank loaded in a real embedded FalkorDB) and one
with two H100 traces, shared with these tests; an open store on the first and its gpt_2rank."""

from collections.abc import Iterator

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import GraphStore, open_store
from bottleneck_oracle.workspace.loaded import LoadedTrace, loaded_trace
from tests.agent.conftest import agent_home, agent_settings, gpu_settings, untraced_settings

__all__ = ["agent_home", "agent_settings", "gpt", "gpu_settings", "store", "untraced_settings"]


@pytest.fixture(scope="module")
def store(agent_settings: Settings) -> Iterator[GraphStore]:
    with open_store(agent_settings, start=True) as s:
        yield s


@pytest.fixture(scope="module")
def gpt(store: GraphStore, agent_settings: Settings) -> LoadedTrace:
    return loaded_trace(store, "gpt_2rank", agent_settings)
