"""Finding a trace in the graph database from what a user calls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb import open_store, stop_server
from bottleneck_oracle.workspace.loaded import loaded_trace
from tests.agent.conftest import GPT


def test_a_trace_by_name_id_prefix_path_or_the_newest(agent_settings: Settings) -> None:
    with open_store(agent_settings, start=True) as store:
        by_name = loaded_trace(store, "gpt_2rank", agent_settings)
        assert loaded_trace(store, by_name.trace_id[:6], agent_settings) == by_name
        assert loaded_trace(store, GPT, agent_settings) == by_name
        assert loaded_trace(store, None, agent_settings).trace_id  # the newest load
        with pytest.raises(ConfigError, match="known: .*gpt_2rank"):
            loaded_trace(store, "no-such-run", agent_settings)


def test_nothing_loaded_says_how_to_load(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workers=2)
    try:
        with open_store(settings, start=True) as store, pytest.raises(ConfigError, match="oracle ingest PATH"):
            loaded_trace(store, None, settings)
    finally:
        stop_server(tmp_path)
