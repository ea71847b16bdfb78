"""Tests for gnn/hetero.py: the PyG form keeps every node and edge of a StepGraph."""

from __future__ import annotations

from bottleneck_oracle.gnn.data import NODE_TYPES, step_graphs
from bottleneck_oracle.gnn.hetero import to_hetero
from tests.analysis.synth_cases import synth_case


def _case():  # type: ignore[no-untyped-def]
    a, _ = synth_case("tiny", dp=2)
    return a


def test_hetero_data_keeps_every_node_and_edge() -> None:
    g = step_graphs(_case())[0]
    data = to_hetero(g)
    assert sum(data[t].num_nodes for t in NODE_TYPES) == len(g)
    for key in data.edge_types:
        src, _, dst = key
        index = data[key].edge_index
        assert index[0].max() < data[src].num_nodes and index[1].max() < data[dst].num_nodes
    assert ("runtime", "launch", "kernel") in data.edge_types and ("kernel", "rev_launch", "runtime") in data.edge_types
    directed = step_graphs(_case(), bidirectional=False)[0]
    assert not any(rel.startswith("rev_") for _, rel, _ in directed.edges)
    assert len(g.edges) == 2 * len(directed.edges)
