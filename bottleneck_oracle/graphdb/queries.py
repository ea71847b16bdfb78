"""The Cypher query library: every query the project sends, read from ``graphdb/queries/*.cypher``.

Each file holds one named query under a header of ``// key: value`` lines (name, mode, guard,
template, params, returns) followed by its description. ``NAME.cypher`` runs on every backend;
``NAME.falkordb.cypher`` and ``NAME.neo4j.cypher`` are the per-backend variants, used only where
the dialects differ (vector search). Templates take a placeholder that only a builder here fills,
from a closed vocabulary (a relationship type, a label, a hop count). Schema statements are built
here from ``graphdb/schema.py``. No other module holds Cypher.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from bottleneck_oracle.errors import QueryError
from bottleneck_oracle.graphdb.schema import INDEXES, KEYS, REL_INDEXES, TRACE_SCOPED, VECTOR_INDEXES, Label, Rel
from bottleneck_oracle.graphdb.types import Backend

__all__ = [
    "Mode", "Query", "get_query", "all_queries", "edge_query", "delete_query", "subgraph_query",
    "schema_statements", "has_write_clause", "prepare", "MAX_HOPS",
]

QUERY_DIR = Path(__file__).resolve().parent / "queries"
MAX_HOPS = 3
GUARD = "MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'"  # a trace is visible once complete
_HEADER = re.compile(r"^//\s*(\w+):\s*(.*)$")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`")
_WRITE = re.compile(r"\b(CREATE|MERGE|SET|DELETE|REMOVE|DROP|FOREACH|LOAD\s+CSV)\b|\bdb\.create\.", re.IGNORECASE)


class Mode(StrEnum):
    """Whether a query only reads (sent on the read-only path) or writes."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Query:
    """One named, parameterized Cypher query of the library.

    Args:
        name (str): the name callers run it by.
        text (str): the Cypher, without its header.
        mode (Mode): read or write.
        backend (Backend | None): the backend this variant is for; None for every backend.
        params (tuple[str, ...]): parameters it needs.
        returns (tuple[str, ...]): columns of its rows.
        summary (str): what it answers, from its header.
        guarded (bool): it starts with the visibility guard (only complete traces).
        template (str | None): the placeholder a builder must fill before it can run.
    """

    name: str
    text: str
    mode: Mode
    backend: Backend | None
    params: tuple[str, ...]
    returns: tuple[str, ...]
    summary: str
    guarded: bool
    template: str | None = None


def has_write_clause(text: str) -> bool:
    """True when Cypher ``text`` holds a clause that writes (CREATE, MERGE, SET, DELETE, ...)."""
    code = "\n".join(line.split("//", 1)[0] for line in _STRING.sub("''", text).splitlines())
    return _WRITE.search(code) is not None


def _names(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _parse(path: Path) -> Query:
    header: dict[str, str] = {}
    doc: list[str] = []
    lines = path.read_text().splitlines()
    body_start = 0
    for i, line in enumerate(lines):
        if not line.startswith("//"):
            body_start = i
            break
        match = _HEADER.match(line)
        if match and match.group(1) in {"name", "mode", "guard", "template", "params", "returns"}:
            header[match.group(1)] = match.group(2).strip()
        else:
            doc.append(line[2:].strip())
    stem, _, variant = path.name.removesuffix(".cypher").partition(".")
    if header.get("name") != stem or header.get("mode") not in {"read", "write"}:
        raise QueryError(f"{path.name}: header needs '// name: {stem}' and '// mode: read|write'")
    text = "\n".join(lines[body_start:]).strip()
    mode = Mode(header["mode"])
    query = Query(
        name=stem, text=text, mode=mode, backend=Backend(variant) if variant else None,
        params=_names(header.get("params", "")), returns=_names(header.get("returns", "")),
        summary=" ".join(doc), guarded=text.startswith(GUARD), template=header.get("template") or None,
    )
    if mode is Mode.READ and header.get("guard") != "none" and not query.guarded:
        raise QueryError(f"{path.name}: a read query about a trace must start with: {GUARD}")
    if has_write_clause(text) != (mode is Mode.WRITE):
        raise QueryError(f"{path.name}: mode is {mode} but the text {'has no' if mode is Mode.WRITE else 'has a'} "
                         "write clause")
    return query


@cache
def _library() -> dict[tuple[str, Backend | None], Query]:
    """Every query file, parsed once per process."""
    out: dict[tuple[str, Backend | None], Query] = {}
    for path in sorted(QUERY_DIR.glob("*.cypher")):
        query = _parse(path)
        out[(query.name, query.backend)] = query
    return out


def all_queries() -> tuple[Query, ...]:
    """Every query of the library, templates unexpanded, sorted by name then backend."""
    return tuple(_library().values())


def _lookup(name: str, backend: Backend) -> Query:
    library = _library()
    query = library.get((name, backend)) or library.get((name, None))
    if query is None:
        raise QueryError(f"no query named {name!r} for {backend} in the query library")
    return query


def get_query(name: str, backend: Backend) -> Query:
    """The query ``name`` as ``backend`` runs it: its variant for the backend, else the common one.

    Raises:
        QueryError: no such query, or it is a template (use its builder).
    """
    query = _lookup(name, backend)
    if query.template:
        raise QueryError(f"query {name!r} is a template: build it with its builder")
    return query


def prepare(query: Query | str, backend: Backend, mode: Mode, params: Mapping[str, Any]) -> Query:
    """The library query a backend runs on its ``mode`` path, checked before it is sent.

    Raises:
        QueryError: no such query, a template, a query of the other mode (a write on the
            read-only path), or a missing parameter.
    """
    query = get_query(query, backend) if isinstance(query, str) else query
    if query.mode is not mode:
        raise QueryError(f"query {query.name!r} writes: the read-only path refuses it" if mode is Mode.READ
                         else f"query {query.name!r} only reads: run it with read()")
    missing = [p for p in query.params if p not in params]
    if missing:
        raise QueryError(f"query {query.name!r} needs parameter(s) {', '.join(missing)}")
    return query


def _fill(name: str, placeholder: str, value: str, suffix: str) -> Query:
    query = _lookup(name, Backend.FALKORDB)  # templates are shared by both backends
    if query.template != placeholder:
        raise QueryError(f"query {name!r} takes no {placeholder} placeholder")
    return replace(query, name=f"{name}_{suffix}", text=query.text.replace("{" + placeholder + "}", value),
                   template=None)


def edge_query(rel: Rel) -> Query:
    """``load_edges`` for one relationship type."""
    return _fill("load_edges", "REL", Rel(rel).value, Rel(rel).value.lower())


def delete_query(label: Label) -> Query:
    """``delete_trace_nodes`` for one trace-scoped label."""
    if label not in TRACE_SCOPED:
        raise QueryError(f"{label} nodes do not belong to a trace")
    return _fill("delete_trace_nodes", "LABEL", Label(label).value, Label(label).value.lower())


def subgraph_query(hops: int) -> Query:
    """``critical_subgraph`` reaching ``hops`` edges (0 to ``MAX_HOPS``) from the path."""
    if not 0 <= hops <= MAX_HOPS:
        raise QueryError(f"hops must be between 0 and {MAX_HOPS}, not {hops}")
    return _fill("critical_subgraph", "HOPS", str(int(hops)), f"{int(hops)}hops")


def schema_statements(backend: Backend) -> tuple[str, ...]:
    """The Cypher that creates the schema's indexes on ``backend`` (unique keys, lookups, vectors).

    On Neo4j a uniqueness constraint brings its own index; FalkorDB needs an index under each
    unique key, and takes its constraints as a command (``GRAPH.CONSTRAINT``), not Cypher.
    """
    out: list[str] = []
    if backend is Backend.NEO4J:
        for key in KEYS:
            out.append(f"CREATE CONSTRAINT {key.label.lower()}_{key.prop} IF NOT EXISTS "
                       f"FOR (n:{key.label}) REQUIRE n.{key.prop} IS UNIQUE")
        for key in INDEXES:
            out.append(f"CREATE INDEX {key.label.lower()}_{key.prop} IF NOT EXISTS "
                       f"FOR (n:{key.label}) ON (n.{key.prop})")
        for rel, prop in REL_INDEXES:
            out.append(f"CREATE INDEX {rel.lower()}_{prop} IF NOT EXISTS FOR ()-[r:{rel}]-() ON (r.{prop})")
        for v in VECTOR_INDEXES:
            out.append(f"CREATE VECTOR INDEX {v.name} IF NOT EXISTS FOR (n:{v.label}) ON (n.{v.prop}) "
                       f"OPTIONS {{indexConfig: {{`vector.dimensions`: {v.dim}, "
                       "`vector.similarity_function`: 'cosine'}}")
        return tuple(out)
    for key in (*KEYS, *INDEXES):
        out.append(f"CREATE INDEX FOR (n:{key.label}) ON (n.{key.prop})")
    for rel, prop in REL_INDEXES:
        out.append(f"CREATE INDEX FOR ()-[r:{rel}]-() ON (r.{prop})")
    for v in VECTOR_INDEXES:
        out.append(f"CREATE VECTOR INDEX FOR (n:{v.label}) ON (n.{v.prop}) "
                   f"OPTIONS {{dimension: {v.dim}, similarityFunction: 'cosine'}}")
    return tuple(out)
