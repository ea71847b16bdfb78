"""Retrieval fixtures: two real traces ingested through the service layer (``workspace.ingest``) into
a real graph database, their findings embedded: the embedded FalkorDB of a temporary workspace,
and Neo4j when ``NEO4J_URI`` is set."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from bottleneck_oracle.graphdb import GraphStore, open_store, stop_server
from bottleneck_oracle.workspace.ingest import Ingested, ingest
from tests.graphdb.conftest import BACKENDS, DLRM, GPT, graph_settings


@dataclass(frozen=True)
class Memory:
    """An open store holding the ingested traces."""

    store: GraphStore
    gpt: Ingested
    dlrm: Ingested


@pytest.fixture(scope="session", params=BACKENDS)
def memory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """gpt_2rank (rank 1 pauses, then straggles, in step 5) and the 8-rank DLRM job, ingested."""
    home = tmp_path_factory.mktemp("retrieval_home")
    settings = graph_settings(home, request.param, "retrieval")
    try:
        gpt = ingest([GPT], settings, predict=False)
        dlrm = ingest([DLRM], settings, predict=False)
        with open_store(settings) as store:
            yield Memory(store, gpt, dlrm)
    finally:
        stop_server(home)
