"""The GraphStore protocol and ``open_store``, the one factory that picks a backend by URL.

``embedded`` (the default) is the FalkorDB server this project runs in the workspace;
``falkordb://[:password@]host:port[/graph]`` a remote FalkorDB; ``neo4j://``, ``neo4j+s://``,
``bolt://`` and ``bolt+s://`` Neo4j 5 or Aura, with the user and password from the settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from bottleneck_oracle.config import EMBEDDED_GRAPH_URL, Settings
from bottleneck_oracle.errors import ConfigError, GraphStoreError
from bottleneck_oracle.graphdb.falkordb import FalkorStore
from bottleneck_oracle.graphdb.neo4j import NEO4J_SCHEMES, Neo4jStore
from bottleneck_oracle.graphdb.queries import Query
from bottleneck_oracle.graphdb.server import HOST, START_HINT, server_status, start_server
from bottleneck_oracle.graphdb.types import Backend, Capability, Row, WriteResult

__all__ = ["GraphStore", "open_store"]

_REMOTE_HINT = "check ORACLE_GRAPH_URL and that the server runs"


@runtime_checkable
class GraphStore(Protocol):
    """A graph database the project loads traces into and queries: FalkorDB or Neo4j.

    Queries are named queries of the library (``graphdb/queries``); ``read`` takes only read
    queries and runs them where the server itself refuses writes.
    """

    backend: Backend
    capabilities: frozenset[Capability]

    def read(self, query: Query | str, params: Mapping[str, Any] | None = None, *,
             timeout_ms: int | None = None) -> list[Row]:
        """Runs a read query by name (or a built ``Query``) and returns its rows; ``timeout_ms``
        makes the server stop it after that long (a QueryError)."""
        ...

    def write(self, query: Query | str, params: Mapping[str, Any] | None = None) -> WriteResult:
        """Runs a write query as one transaction and returns what it changed."""
        ...

    def apply_schema(self) -> None:
        """Creates the schema's constraints and indexes; existing ones are kept."""
        ...

    def close(self) -> None:
        """Releases the connection."""
        ...

    def __enter__(self) -> GraphStore:
        ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        ...


def _open_embedded(settings: Settings, start: bool) -> FalkorStore:
    info = start_server(settings.home, binary=settings.falkordb_server) if start else server_status(settings.home)
    if info is None:
        raise GraphStoreError(f"the graph database of workspace {settings.home} is not running: {START_HINT}")
    return FalkorStore.open(HOST, info.port, password=info.password, graph=settings.graph_name, hint=START_HINT,
                            is_managed=True)


def _open_falkordb(url: str, settings: Settings) -> FalkorStore:
    parts = urlsplit(url)
    if not parts.hostname:
        raise ConfigError(f"{url}: a FalkorDB URL reads falkordb://[:password@]host[:port][/graph]")
    password = unquote(parts.password) if parts.password else settings.graph_password
    graph = parts.path.strip("/") or settings.graph_name
    return FalkorStore.open(parts.hostname, parts.port or 6379, password=password, graph=graph, hint=_REMOTE_HINT)


def open_store(settings: Settings, *, start: bool = False) -> GraphStore:
    """Opens the graph database ``settings.graph_url`` names.

    Args:
        settings (Settings): the URL, the workspace and credentials.
        start (bool): for the embedded server: start it when it is not running (default: fail).

    Raises:
        ConfigError: the URL's scheme is unknown, or credentials are missing.
        GraphStoreError: the server is not running or not reachable (the message says how to start it).
    """
    url = settings.graph_url.strip()
    if url == EMBEDDED_GRAPH_URL:
        return _open_embedded(settings, start)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "falkordb":
        return _open_falkordb(url, settings)
    if scheme in NEO4J_SCHEMES:
        return Neo4jStore.open(url, user=settings.neo4j_user, password=settings.neo4j_password,
                               database=settings.neo4j_database)
    raise ConfigError(f"ORACLE_GRAPH_URL {url!r}: expected 'embedded', falkordb://host:port, "
                      "or neo4j://, neo4j+s://, bolt://, bolt+s:// for Neo4j")
