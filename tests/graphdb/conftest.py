"""Graph database fixtures: one embedded FalkorDB per test session, the stores, the loaded traces.

The session starts a real FalkorDB server (the project's own ``start_server``) in a temporary
workspace and stops it at the end; under xdist each worker is a session with its own server.
Every store-backed fixture is parametrized over the backends: FalkorDB always, Neo4j when
``NEO4J_URI`` is set (``requires_neo4j``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import GraphStore, load_analysis, open_store, start_server, stop_server, trace_id
from bottleneck_oracle.graphdb.embedding import Embedder
from bottleneck_oracle.graphdb.memory import default_embedder
from bottleneck_oracle.traces import read_trace
from tests.conftest import NEO4J_URI, REAL, REPO, requires_neo4j

GPT = REPO / "examples" / "gpt_2rank"  # real 2-rank gloo capture, rank 1 straggles in step 5
DLRM = REAL / "param" / "dlrm_8rank_kineto"  # real 8-rank NCCL job, rank 7 late in step 10
HTA = REAL / "hta" / "cp_simple_add"  # real 1-rank GPU trace from HTA's tests, no ProfilerStep: one step -1
BACKENDS = ["falkordb", pytest.param("neo4j", marks=requires_neo4j)]


@dataclass(frozen=True)
class LoadedTrace:
    """A trace loaded into the store beside its in-memory analysis."""

    name: str
    trace_id: str
    analysis: Analysis


def graph_settings(home: Path, backend: str, graph: str) -> Settings:
    """Settings for one backend: the session's embedded server, or Neo4j at NEO4J_URI."""
    if backend == "neo4j":
        return Settings.from_env({**os.environ, "ORACLE_HOME": str(home), "ORACLE_GRAPH_URL": NEO4J_URI})
    return Settings(home=home, workers=2, graph_name=graph)


@pytest.fixture(scope="session")
def graph_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A workspace whose embedded FalkorDB runs for the whole session."""
    home = tmp_path_factory.mktemp("oracle_home")
    start_server(home)
    yield home
    stop_server(home)


@pytest.fixture(scope="session", params=BACKENDS)
def store(request: pytest.FixtureRequest, graph_home: Path) -> Iterator[GraphStore]:
    """An open store with the schema applied, one per backend."""
    with open_store(graph_settings(graph_home, request.param, "conformance")) as s:
        s.apply_schema()
        yield s


@pytest.fixture(scope="session")
def analyses() -> dict[str, LoadedTrace]:
    """The three real traces, analysed in memory (not loaded yet)."""
    out = {}
    for path in (GPT, DLRM, HTA):
        trace = read_trace(path, workers=2)
        out[path.name] = LoadedTrace(path.name, trace_id(trace), analyze(trace))
    return out


@pytest.fixture(scope="session")
def loaded(store: GraphStore, analyses: dict[str, LoadedTrace],
           tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoadedTrace]:
    """The three traces loaded in full; on Neo4j, xdist workers share the database, so they take turns."""
    lock_path = tmp_path_factory.getbasetemp().parent / "graph-load.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for t in analyses.values():
            load_analysis(store, t.analysis, trace_id=t.trace_id, name=t.name)
    return analyses


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2, loaded once per process (the one ingest uses too)."""
    return default_embedder()
