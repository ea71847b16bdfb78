"""The query library: well-formed headers, guarded reads, and Cypher that Neo4j's own parser accepts.

No Neo4j server can run here, so every query Neo4j would run (the shared ones and the Neo4j
variants, every template expansion, the schema statements) goes through Neo4j's Cypher parser
and semantic analysis (@neo4j-cypher/language-support, run with node) for Cypher 5 and Cypher 25:
a query that only FalkorDB accepts fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest

from bottleneck_oracle.errors import QueryError
from bottleneck_oracle.graphdb.queries import (
    GUARD, MAX_HOPS, Mode, Query, all_queries, delete_query, edge_query, get_query, has_write_clause,
    schema_statements, subgraph_query,
)
from bottleneck_oracle.graphdb.schema import TRACE_SCOPED, Label, Rel
from bottleneck_oracle.graphdb.types import Backend
from tests.conftest import REPO

LINTER = REPO / "tools" / "cypher-lint"
_SAMPLES: dict[str, Any] = {"trace": "t", "keys": ["t:1"], "vector": [0.1] * 384, "pattern": "mm", "name": "n",
                            "files": ["f"], "embedding": [[0.1] * 384]}


def _neo4j_queries() -> list[Query]:
    """Every query text Neo4j would run; templates expanded once each (their values are identifiers
    from a closed vocabulary, or the hop count, and do not change how the query parses)."""
    out = [q for q in all_queries() if q.backend in (None, Backend.NEO4J) and not q.template]
    return out + [edge_query(Rel.NEST), subgraph_query(MAX_HOPS), delete_query(TRACE_SCOPED[0])]


def _lint(texts: dict[str, tuple[str, tuple[str, ...]]],
          versions: list[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Neo4j's diagnostics per (query name, Cypher version)."""
    if shutil.which("node") is None or not (LINTER / "node_modules").is_dir():
        pytest.fail(f"Neo4j's Cypher linter is not installed: run `make setup` (node and npm ci in {LINTER})")
    props = sorted({p for text, _ in texts.values() for p in re.findall(r"\b[a-z]\w*\.([a-z_]\w*)\b", text)} |
                   {p for text, _ in texts.values() for p in re.findall(r"[{,]\s*([a-z_]\w*):", text)})
    request = {
        "queries": [{"name": name, "text": text, "parameters": {p: _SAMPLES.get(p, 1) for p in params}}
                    for name, (text, params) in texts.items()],
        "labels": [label.value for label in Label] + ["BulkOp"],  # BulkOp, BULK: the benchmark's ceiling
        "relationshipTypes": [rel.value for rel in Rel] + ["BULK"],
        "propertyKeys": props, "versions": versions,
    }
    out = subprocess.run(["node", str(LINTER / "lint.mjs")], input=json.dumps(request), capture_output=True,
                         text=True, timeout=120, check=True)
    return {(r["name"], r["version"]): r["diagnostics"] for r in json.loads(out.stdout)}


def test_every_query_file_parses_with_its_header() -> None:
    queries = all_queries()
    names = {q.name for q in queries}
    assert {"trace_steps", "slow_steps", "critical_path", "critical_subgraph", "top_critical_ops",
            "compare_steps", "collective_stragglers", "step_findings", "ops_by_name", "playbook_search"} <= names
    for q in queries:
        assert q.summary and (q.returns or q.mode is Mode.WRITE), q.name
        assert set(re.findall(r"\$(\w+)", q.text)) == set(q.params), q.name


def test_read_queries_about_a_trace_start_with_the_visibility_guard() -> None:
    for q in all_queries():
        if q.mode is Mode.READ and "trace" in q.params and q.name not in ("trace_state", "trace_inventory", "load_parts"):
            assert q.text.startswith(GUARD), q.name


def test_modes_match_the_text() -> None:
    for q in all_queries():
        assert has_write_clause(q.text) == (q.mode is Mode.WRITE), q.name


def test_per_backend_variants_only_where_dialects_differ() -> None:
    variants = {q.name for q in all_queries() if q.backend is not None}
    # vector search and vector storage
    assert variants == {"playbook_search", "load_playbook", "finding_search", "load_finding_embeddings"}


def test_write_clause_detection_ignores_strings_and_comments() -> None:
    assert has_write_clause("MATCH (n) SET n.x = 1")
    assert has_write_clause("MATCH (n) detach delete n")
    assert not has_write_clause("MATCH (n {name: 'CREATE TABLE'}) RETURN n // DELETE later")
    assert not has_write_clause("MATCH (n) RETURN n.created, n.offset")


def test_get_query_picks_the_backend_variant() -> None:
    assert "db.idx.vector" in get_query("playbook_search", Backend.FALKORDB).text
    assert "db.index.vector" in get_query("playbook_search", Backend.NEO4J).text
    assert get_query("trace_steps", Backend.NEO4J) is get_query("trace_steps", Backend.FALKORDB)


def test_templates_need_their_builder() -> None:
    with pytest.raises(QueryError):
        get_query("load_edges", Backend.FALKORDB)
    with pytest.raises(QueryError):
        subgraph_query(MAX_HOPS + 1)
    with pytest.raises(QueryError):
        delete_query(Label.PLAYBOOK)
    assert ":NEST]" in edge_query(Rel.NEST).text and "*0..2]" in subgraph_query(2).text


def test_neo4j_parser_accepts_every_query_neo4j_runs_and_rejects_falkordb_only_ones() -> None:
    """One node process (its start-up and JIT warm-up are most of a small run) for both checks."""
    texts = {q.name: (q.text, q.params) for q in _neo4j_queries()}
    texts |= {f"schema_{i}": (s, ()) for i, s in enumerate(schema_statements(Backend.NEO4J))}
    falkor_only = {f"falkordb_{q.name}": (q.text, q.params) for q in all_queries() if q.backend is Backend.FALKORDB}
    falkor_only["falkordb_vector_index"] = (schema_statements(Backend.FALKORDB)[-1], ())
    falkor_only["legacy_index"] = ("CREATE INDEX ON :Op(key)", ())  # FalkorDB still takes the Neo4j 3 form
    diagnostics = _lint(texts | falkor_only, ["CYPHER 5", "CYPHER 25"])
    assert len(diagnostics) == 2 * len(texts | falkor_only)
    problems = {key: [d["message"] for d in ds] for key, ds in diagnostics.items() if key[0] in texts and ds}
    assert problems == {}
    for key, ds in diagnostics.items():
        if key[0] in falkor_only:
            assert any(d["severity"] == "error" for d in ds), key
