"""Closed vocabularies and records of the graph database layer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Backend", "Capability", "Detail", "Row", "WriteResult", "TraceSummary"]

Row = dict[str, Any]  # one result row: column name → value


class Backend(StrEnum):
    """Which graph database a store talks to; query variants are keyed by it."""

    FALKORDB = "falkordb"
    NEO4J = "neo4j"


class Capability(StrEnum):
    """Optional features a backend has; the conformance tests skip by capability, never by try/except."""

    VECTOR_SEARCH = "vector_search"  # a vector index and k-nearest-neighbour queries
    UNIQUE_CONSTRAINTS = "unique_constraints"  # the server refuses a second node with a key
    READ_ONLY_ENFORCED = "read_only_enforced"  # the server itself refuses writes on the read path
    MULTI_STATEMENT_TRANSACTIONS = "multi_statement_transactions"  # several statements in one transaction
    MANAGED_SERVER = "managed_server"  # the project starts and stops the server (embedded FalkorDB)


class Detail(StrEnum):
    """How much of a trace's graph is loaded.

    ``full``: every op and DAG edge. ``critical``: the ops on a critical path, their k-hop
    neighbourhood and every collective member. ``summary``: steps, findings and per-step aggregates.
    """

    FULL = "full"
    CRITICAL = "critical"
    SUMMARY = "summary"


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What one write query changed, as the server counted it.

    Args:
        nodes_created (int): nodes created.
        relationships_created (int): relationships created.
        nodes_deleted (int): nodes deleted (relationships go with them).
        properties_set (int): properties set.
        rows (list[Row]): the rows the query returned.
    """

    nodes_created: int = 0
    relationships_created: int = 0
    nodes_deleted: int = 0
    properties_set: int = 0
    rows: tuple[Row, ...] = ()


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """One trace in the database, as ``oracle traces`` lists it.

    Args:
        trace_id (str): content hash of the input files.
        name (str): the folder or file it was read from.
        status (str): ``complete``, or ``loading`` while (or after a crash during) a load.
        detail (Detail): what was loaded.
        ranks (int): ranks of the job.
        steps (int): (step, rank) rows.
        ops (int): op nodes loaded.
        relationships (int): relationships loaded.
        loaded_at (float | None): Unix time the load completed.
    """

    trace_id: str
    name: str
    status: str
    detail: Detail
    ranks: int
    steps: int
    ops: int
    relationships: int
    loaded_at: float | None
