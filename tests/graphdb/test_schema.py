"""The schema tables: every DAG edge type has a relationship type, every matched key an index."""

from __future__ import annotations

import re

from bottleneck_oracle.graph.types import EdgeType
from bottleneck_oracle.graphdb.queries import get_query, subgraph_query
from bottleneck_oracle.graphdb.schema import (
    DAG_RELS,
    EMBEDDING_DIM,
    INDEXES,
    KEYS,
    REL_INDEXES,
    TRACE_SCOPED,
    VECTOR_INDEXES,
    Label,
    Rel,
)
from bottleneck_oracle.graphdb.types import Backend


def test_every_edge_type_is_a_relationship_type() -> None:
    assert set(DAG_RELS) == set(EdgeType)
    assert {rel.value for rel in DAG_RELS.values()} == {e.name for e in EdgeType}


def test_queries_that_walk_the_dag_name_every_dag_relationship() -> None:
    dag = {rel.value for rel in DAG_RELS.values()}
    for text in (subgraph_query(1).text, get_query("subgraph_edges", Backend.FALKORDB).text):
        tail = text.split("MATCH (a")[-1].split("MATCH p")[-1]
        walked = set(re.search(r"\[\w*:([A-Z_|]+)", tail).group(1).split("|"))
        assert walked == dag


def test_every_label_has_a_unique_key_and_trace_scoped_labels_an_index() -> None:
    assert {key.label for key in KEYS} == set(Label)
    assert {key.label for key in INDEXES if key.prop == "trace"} == set(TRACE_SCOPED)
    assert (Rel.CRITICAL_NEXT, "path") in REL_INDEXES
    assert [(v.label, v.dim) for v in VECTOR_INDEXES] == [(Label.PLAYBOOK, EMBEDDING_DIM),
                                                          (Label.FINDING, EMBEDDING_DIM)]
