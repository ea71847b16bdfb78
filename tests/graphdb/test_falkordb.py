"""FalkorStore against the session's real FalkorDB: parameters round-trip, errors say what to do."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from bottleneck_oracle.errors import GraphStoreError, QueryError
from bottleneck_oracle.graphdb import Capability, server_status
from bottleneck_oracle.graphdb.falkordb import FalkorStore, cypher_literal
from bottleneck_oracle.graphdb.queries import Mode, Query

ECHO = Query(name="echo", text="RETURN $value AS value", mode=Mode.READ, backend=None, params=("value",),
             returns=("value",), summary="returns its parameter", guarded=False)


@pytest.fixture(scope="module")
def falkor(graph_home: Path) -> FalkorStore:
    info = server_status(graph_home)
    assert info is not None
    store = FalkorStore.open("127.0.0.1", info.port, password=info.password, graph="falkordb_tests", hint="(test)",
                             is_managed=True)
    store.apply_schema()  # creates the graph: reading a graph that does not exist yet answers nothing
    return store


@pytest.mark.parametrize("value", [
    'quote " backslash \\ newline \n tab \t', "unicode é 日本 🙂", "", "aten::mm(Tensor self) -> Tensor",
    0, -7, 2**62, 1e-05, -0.5, 1e300, True, False, None, [1, 2, 3], [1.5, None, "x"], [[1, 2], []],
    ["a", 'b"c'], {"k": 1, "two words": "v"},
])
def test_parameters_round_trip(falkor: FalkorStore, value: Any) -> None:
    assert falkor.read(ECHO, {"value": value}) == [{"value": value}]


def test_non_finite_floats_and_objects_are_refused() -> None:
    with pytest.raises(ValueError):
        cypher_literal(float("nan"))
    with pytest.raises(TypeError):
        cypher_literal(object())


def test_a_graph_never_written_reads_as_empty(graph_home: Path) -> None:
    info = server_status(graph_home)
    assert info is not None
    with FalkorStore.open("127.0.0.1", info.port, password=info.password, graph="never_written", hint="") as store:
        assert store.read("trace_list") == []


def test_capabilities_of_the_embedded_server(falkor: FalkorStore) -> None:
    assert {Capability.MANAGED_SERVER, Capability.READ_ONLY_ENFORCED} <= falkor.capabilities
    assert Capability.MULTI_STATEMENT_TRANSACTIONS not in falkor.capabilities


def test_a_server_error_is_a_query_error(falkor: FalkorStore) -> None:
    broken = Query(name="broken", text="RETURN nosuchfunction(1) AS x", mode=Mode.READ, backend=None, params=(),
                   returns=("x",), summary="", guarded=False)
    with pytest.raises(QueryError) as failed:
        falkor.read(broken)
    assert "'broken'" in str(failed.value)


def test_open_on_a_closed_port_says_how_to_start(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(GraphStoreError) as down:
        FalkorStore.open("127.0.0.1", port, password=None, graph="g", hint="start it with `oracle db start`")
    assert "not reachable" in str(down.value) and "oracle db start" in str(down.value)


def test_open_with_a_wrong_password_is_refused(graph_home: Path) -> None:
    info = server_status(graph_home)
    assert info is not None
    with pytest.raises(GraphStoreError) as refused:
        FalkorStore.open("127.0.0.1", info.port, password="wrong", graph="g", hint="")
    assert "password" in str(refused.value)
