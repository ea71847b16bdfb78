"""Finding a trace in the graph database from what a user calls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb import open_store, stop_server
from bottleneck_oracle.graphdb.memory import findings_embedded
from bottleneck_oracle.workspace.ingest import ingest
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


def test_a_new_path_is_loaded_without_embeddings_and_oracle_ingest_adds_them(tmp_path: Path) -> None:
    """A question's load leaves the findings' embeddings (and the graph model) for later; ``oracle ingest`` of
    the same trace afterwards loads nothing again and embeds them."""
    settings = Settings(home=tmp_path, workers=2)
    stages: list[str] = []
    try:
        with open_store(settings, start=True) as store:
            t = loaded_trace(store, GPT, settings, stage=stages.append)
            cold = findings_embedded(store, t.trace_id)
        done = ingest([GPT], settings, predict=False)
    finally:
        stop_server(tmp_path)
    assert stages == ["reading traces", "analysing", "loading the optimization playbook", "loading"]
    assert cold == (3, 0)
    assert done.report.outcome == "unchanged" and done.embedded == 3
