"""Neo4jStore: the GraphStore on Neo4j 5 or Aura through the official driver (``neo4j://``, ``bolt://``).

The driver is an optional dependency (``pip install 'bottleneck-oracle[neo4j]'``), imported when a
store is opened. Reads run in read transactions (the server refuses a write in one); each write
query runs in its own write transaction, so a load batch and its progress mark commit together.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from bottleneck_oracle.errors import ConfigError, GraphStoreError, QueryError, StoreUnavailableError, one_line
from bottleneck_oracle.graphdb.queries import Mode, Query, prepare, schema_statements
from bottleneck_oracle.graphdb.types import Backend, Capability, Row, WriteResult

if TYPE_CHECKING:
    import neo4j

__all__ = ["Neo4jStore", "NEO4J_SCHEMES"]

NEO4J_SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")
_CAPABILITIES = frozenset({Capability.VECTOR_SEARCH, Capability.UNIQUE_CONSTRAINTS,
                           Capability.READ_ONLY_ENFORCED, Capability.MULTI_STATEMENT_TRANSACTIONS})


def _unreachable(uri: str, error: BaseException) -> GraphStoreError:
    return StoreUnavailableError(f"Neo4j at {uri} is not reachable ({one_line(error)}): check ORACLE_GRAPH_URL")


class Neo4jStore:
    """A driver bound to one Neo4j database. Open it with ``Neo4jStore.open``.

    Args:
        driver (neo4j.Driver): a driver whose connectivity was checked.
        database (str | None): the database (None: the server's default).
        uri (str): for messages.
    """

    backend = Backend.NEO4J
    capabilities = _CAPABILITIES

    def __init__(self, driver: neo4j.Driver, database: str | None, uri: str) -> None:
        self._driver = driver
        self.database = database
        self.uri = uri

    @classmethod
    def open(cls, uri: str, *, user: str, password: str | None, database: str | None = None) -> Neo4jStore:
        """Connects to Neo4j at ``uri`` and checks that it answers.

        Raises:
            ConfigError: the ``neo4j`` driver is not installed or no password is set.
            GraphStoreError: the server is not reachable or refuses the credentials.
        """
        try:
            import neo4j  # optional dependency: only Neo4j users install it
            import neo4j.exceptions
        except ImportError as e:
            raise ConfigError(f"{uri}: the neo4j driver is not installed "
                              "(pip install 'bottleneck-oracle[neo4j]')") from e
        if password is None:
            raise ConfigError(f"{uri}: set NEO4J_PASSWORD (and NEO4J_USERNAME) to connect to Neo4j")
        try:
            driver = neo4j.GraphDatabase.driver(uri, auth=(user, password), connection_timeout=10)
            driver.verify_connectivity()
        except neo4j.exceptions.AuthError as e:
            raise GraphStoreError(f"Neo4j at {uri} refused the credentials of user {user!r}") from e
        except (neo4j.exceptions.DriverError, neo4j.exceptions.Neo4jError, OSError, ValueError) as e:
            raise _unreachable(uri, e) from e
        return cls(driver, database, uri)

    def __enter__(self) -> Neo4jStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Closes the driver and its connections."""
        self._driver.close()

    def _run(self, query: Query, params: Mapping[str, Any], read_only: bool, timeout_ms: int | None = None) -> Any:
        import neo4j
        import neo4j.exceptions

        text = query.text if timeout_ms is None else neo4j.Query(query.text, timeout=timeout_ms / 1000)
        try:
            return self._driver.execute_query(
                text, dict(params), database_=self.database,
                routing_=neo4j.RoutingControl.READ if read_only else neo4j.RoutingControl.WRITE)
        except (neo4j.exceptions.ServiceUnavailable, neo4j.exceptions.SessionExpired, OSError) as e:
            raise _unreachable(self.uri, e) from e
        except neo4j.exceptions.Neo4jError as e:
            raise QueryError(f"query {query.name!r} failed on Neo4j: {e.code}: {one_line(e.message)}") from e

    def read(self, query: Query | str, params: Mapping[str, Any] | None = None, *,
             timeout_ms: int | None = None) -> list[Row]:
        """Runs a read query of the library in a read transaction.

        Args:
            timeout_ms (int | None): the transaction's time limit (None: the server's default).

        Raises:
            QueryError: the query writes, misses a parameter, runs past ``timeout_ms``, or the
                server rejects it.
            GraphStoreError: the server is down.
        """
        params = params or {}
        query = prepare(query, self.backend, Mode.READ, params)
        result = self._run(query, params, read_only=True, timeout_ms=timeout_ms)
        return [record.data() for record in result.records]

    def write(self, query: Query | str, params: Mapping[str, Any] | None = None) -> WriteResult:
        """Runs a write query of the library in its own write transaction.

        Raises:
            QueryError: the query is a read query, misses a parameter, or the server rejects it.
            GraphStoreError: the server is down.
        """
        params = params or {}
        query = prepare(query, self.backend, Mode.WRITE, params)
        result = self._run(query, params, read_only=False)
        counters = result.summary.counters
        return WriteResult(
            nodes_created=counters.nodes_created, relationships_created=counters.relationships_created,
            nodes_deleted=counters.nodes_deleted, properties_set=counters.properties_set,
            rows=tuple(record.data() for record in result.records),
        )

    def apply_schema(self) -> None:
        """Creates the schema's uniqueness constraints, indexes and vector index (IF NOT EXISTS)."""
        import neo4j.exceptions

        for statement in schema_statements(self.backend):
            try:
                self._driver.execute_query(statement, database_=self.database)
            except neo4j.exceptions.ServiceUnavailable as e:
                raise _unreachable(self.uri, e) from e
            except neo4j.exceptions.Neo4jError as e:
                raise QueryError(f"schema statement failed on Neo4j: {statement}: {e.code}: "
                                 f"{one_line(e.message)}") from e
