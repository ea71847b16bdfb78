"""FalkorStore: the GraphStore on FalkorDB, the embedded server's or a remote one (``falkordb://``).

Parameters travel in FalkorDB's ``CYPHER name=value`` header, written here as Cypher literals
(columns of numbers are joined, not formatted value by value: a 1M-op trace sends 16M values).
Reads go through ``GRAPH.RO_QUERY``, which the server refuses to run a write on. Each query is
atomic on FalkorDB, so a load batch and its progress mark commit together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import falkordb
import redis
import redis.backoff
import redis.exceptions
import redis.retry

from bottleneck_oracle.errors import GraphStoreError, QueryError, StoreUnavailableError, one_line
from bottleneck_oracle.graphdb.queries import Mode, Query, prepare, schema_statements
from bottleneck_oracle.graphdb.schema import KEYS
from bottleneck_oracle.graphdb.types import Backend, Capability, Row, WriteResult

__all__ = ["FalkorStore", "cypher_literal"]

_BASE_CAPABILITIES = frozenset({Capability.VECTOR_SEARCH, Capability.UNIQUE_CONSTRAINTS,
                                Capability.READ_ONLY_ENFORCED})
_ALREADY = ("already indexed", "already exists", "already exist")
_NO_GRAPH = "empty key"  # a read of a graph nothing was written to yet


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _float(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"parameter value {value!r} is not a finite number")
    return repr(value)


def _column(values: Sequence[Any]) -> str:
    """A list literal; columns of one type are joined in one pass."""
    first = type(values[0]) if len(values) else None
    if first is not None and all(type(v) is first for v in values):
        if first is int:
            return "[" + ",".join(map(str, values)) + "]"
        if first is float:
            return "[" + ",".join(map(_float, values)) + "]"
        if first is str:
            return "[" + ",".join(map(_quote, values)) + "]"
    return "[" + ",".join(map(cypher_literal, values)) + "]"


def cypher_literal(value: Any) -> str:
    """``value`` (None, bool, int, float, str, list, tuple or dict of these) as a Cypher literal.

    Raises:
        ValueError: a float is NaN or infinite.
        TypeError: a value of another type.
    """
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (list, tuple)):
        return _column(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"`{k}`:{cypher_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot send a {type(value).__name__} as a query parameter")


def _header(params: Mapping[str, Any]) -> str:
    if not params:
        return ""
    return "CYPHER " + " ".join(f"{name}={cypher_literal(value)}" for name, value in params.items()) + " "


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FalkorStore:
    """A connection to one graph of a FalkorDB server. Open it with ``FalkorStore.open``.

    Args:
        client (falkordb.FalkorDB): a connected client.
        graph (str): the graph key.
        address (str): ``host:port``, for messages.
        hint (str): what to do when the server is down, appended to connection errors.
        is_managed (bool): the project runs this server (the embedded one).
    """

    backend = Backend.FALKORDB

    def __init__(self, client: falkordb.FalkorDB, graph: str, address: str, hint: str, is_managed: bool) -> None:
        self._client = client
        self._graph = client.select_graph(graph)
        self.graph_name = graph
        self.address = address
        self.hint = hint
        self.capabilities = _BASE_CAPABILITIES | ({Capability.MANAGED_SERVER} if is_managed else set())

    @classmethod
    def open(cls, host: str, port: int, *, password: str | None, graph: str, hint: str,
             is_managed: bool = False) -> FalkorStore:
        """Connects to FalkorDB at ``host:port`` and checks that it answers and has the graph module.

        Raises:
            GraphStoreError: the server is not reachable, refuses the password, or lacks FalkorDB.
        """
        address = f"{host}:{port}"
        try:
            client = falkordb.FalkorDB(host=host, port=port, password=password, socket_connect_timeout=5,
                                       retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))
            client.connection.execute_command("GRAPH.LIST")
        except redis.exceptions.AuthenticationError as e:
            raise GraphStoreError(f"FalkorDB at {address} refused the password ({one_line(e)})") from e
        except redis.exceptions.ResponseError as e:
            raise GraphStoreError(f"the server at {address} does not run FalkorDB ({one_line(e)})") from e
        except redis.exceptions.RedisError as e:
            raise GraphStoreError(f"FalkorDB at {address} is not reachable ({one_line(e)}): {hint}") from e
        return cls(client, graph, address, hint, is_managed)

    def __enter__(self) -> FalkorStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection pool."""
        self._client.connection.close()

    def _run(self, query: Query, params: Mapping[str, Any], read_only: bool, timeout_ms: int | None = None) -> Any:
        text = _header(params) + query.text
        try:
            return self._graph.ro_query(text, timeout=timeout_ms) if read_only else self._graph.query(text)
        except redis.exceptions.BusyLoadingError as e:
            raise StoreUnavailableError(f"FalkorDB at {self.address} is still loading its data: retry in a moment") from e
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            raise StoreUnavailableError(f"FalkorDB at {self.address} is not reachable ({one_line(e)}): {self.hint}") from e
        except redis.exceptions.ResponseError as e:
            raise QueryError(f"query {query.name!r} failed on FalkorDB: {one_line(e)}") from e

    def read(self, query: Query | str, params: Mapping[str, Any] | None = None, *,
             timeout_ms: int | None = None) -> list[Row]:
        """Runs a read query of the library on the read-only path (``GRAPH.RO_QUERY``).

        Args:
            timeout_ms (int | None): the server stops the query after this long (None: its default).

        Raises:
            QueryError: the query writes, misses a parameter, runs past ``timeout_ms``, or the
                server rejects it.
            GraphStoreError: the server is down.
        """
        params = params or {}
        query = prepare(query, self.backend, Mode.READ, params)
        try:
            result = self._run(query, params, read_only=True, timeout_ms=timeout_ms)
        except QueryError as e:
            if _NO_GRAPH in str(e) and not self._client.connection.exists(self.graph_name):
                return []
            raise
        columns = [_text(h[1]) for h in result.header]
        return [dict(zip(columns, row)) for row in result.result_set]

    def write(self, query: Query | str, params: Mapping[str, Any] | None = None) -> WriteResult:
        """Runs a write query of the library as one atomic query.

        Raises:
            QueryError: the query is a read query, misses a parameter, or the server rejects it.
            GraphStoreError: the server is down.
        """
        params = params or {}
        query = prepare(query, self.backend, Mode.WRITE, params)
        result = self._run(query, params, read_only=False)
        columns = [_text(h[1]) for h in result.header]
        return WriteResult(
            nodes_created=int(result.nodes_created), relationships_created=int(result.relationships_created),
            nodes_deleted=int(result.nodes_deleted), properties_set=int(result.properties_set),
            rows=tuple(dict(zip(columns, row)) for row in result.result_set),
        )

    def apply_schema(self) -> None:
        """Creates the schema's indexes, unique constraints and vector index; existing ones are kept."""
        for statement in schema_statements(self.backend):
            try:
                self._graph.query(statement)
            except redis.exceptions.ResponseError as e:
                if not any(a in str(e) for a in _ALREADY):
                    raise QueryError(f"schema statement failed on FalkorDB: {statement}: {one_line(e)}") from e
            except redis.exceptions.ConnectionError as e:
                raise GraphStoreError(f"FalkorDB at {self.address} is not reachable ({one_line(e)}): "
                                      f"{self.hint}") from e
        for key in KEYS:
            try:
                self._client.connection.execute_command(
                    "GRAPH.CONSTRAINT", "CREATE", self.graph_name, "UNIQUE", "NODE", key.label.value,
                    "PROPERTIES", 1, key.prop)
            except redis.exceptions.ResponseError as e:
                if not any(a in str(e) for a in _ALREADY):
                    raise QueryError(f"unique constraint on {key.label}.{key.prop} failed on FalkorDB: "
                                     f"{one_line(e)}") from e
