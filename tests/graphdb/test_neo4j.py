"""Neo4jStore through the real driver: connection failures are clear; a real server when NEO4J_URI is set.

The query contract itself runs against Neo4j in test_store.py (the same module as FalkorDB's).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, GraphStoreError
from bottleneck_oracle.graphdb import Backend, Capability, GraphStore, open_store
from bottleneck_oracle.graphdb.neo4j import Neo4jStore
from tests.conftest import NEO4J_URI, requires_neo4j


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_a_graph_store_error() -> None:
    with pytest.raises(GraphStoreError) as down:
        Neo4jStore.open(f"bolt://127.0.0.1:{_closed_port()}", user="neo4j", password="x")
    assert "not reachable" in str(down.value) and "ORACLE_GRAPH_URL" in str(down.value)


def test_a_missing_password_is_a_config_error(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workers=1, graph_url=f"neo4j://127.0.0.1:{_closed_port()}")
    with pytest.raises(ConfigError) as missing:
        open_store(settings)
    assert "NEO4J_PASSWORD" in str(missing.value)


@requires_neo4j
def test_a_real_server_opens_with_its_capabilities(tmp_path: Path) -> None:
    settings = Settings.from_env({**os.environ, "ORACLE_HOME": str(tmp_path), "ORACLE_GRAPH_URL": NEO4J_URI})
    with open_store(settings) as store:
        assert isinstance(store, GraphStore) and store.backend is Backend.NEO4J
        assert Capability.MULTI_STATEMENT_TRANSACTIONS in store.capabilities
        store.apply_schema()
        store.apply_schema()  # IF NOT EXISTS: a second run changes nothing
