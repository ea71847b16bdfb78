"""What a trace puts in the graph at each detail level, checked against its analysis (no database)."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.dag.types import CATEGORIES
from bottleneck_oracle.graphdb.tables import critical_nodes, expand_hops, graph_tables, step_key
from bottleneck_oracle.graphdb.types import Detail
from tests.graphdb.conftest import LoadedTrace


@pytest.fixture(scope="module")
def dlrm(analyses: dict[str, LoadedTrace]) -> LoadedTrace:
    return analyses["dlrm_8rank_kineto"]


def test_full_detail_has_every_node_and_edge(dlrm: LoadedTrace) -> None:
    g = dlrm.analysis.graph
    phases = dict(graph_tables(dlrm.analysis, "t").phases)
    assert len(phases["load_ops"]) + len(phases.get("load_loose_ops", [])) == len(g)
    assert sum(len(t) for n, t in phases.items() if n.startswith("load_edges_")) == len(g.edge_src)
    assert len(phases["load_critical_next"]) == sum(len(r.path_node) for r in dlrm.analysis.steps)


def test_critical_detail_keeps_paths_hops_and_collective_members(dlrm: LoadedTrace) -> None:
    a = dlrm.analysis
    one, two = (graph_tables(a, "t", Detail.CRITICAL, hops) for hops in (1, 2))
    path = critical_nodes(a.steps)
    assert one.loaded[path].all() and one.loaded[a.graph.collective >= 0].all()
    assert np.array_equal(one.loaded, expand_hops(a, path, 1) | (a.graph.collective >= 0))
    assert one.loaded.sum() < two.loaded.sum() < len(a.graph)
    edges = dict(one.phases)["load_edges_nest"].columns
    assert one.loaded[edges["src"]].all() and one.loaded[edges["dst"]].all()


def test_summary_detail_has_no_ops(dlrm: LoadedTrace) -> None:
    tables = graph_tables(dlrm.analysis, "t", Detail.SUMMARY)
    assert [name for name, _ in tables.phases] == ["load_ranks", "load_steps", "load_findings", "load_explains"]
    steps = dict(tables.phases)["load_steps"].columns
    assert all(len(top) == len(us) > 0 for top, us in zip(steps["top_ops"], steps["top_ops_us"]))


def test_step_rows_sum_their_attribution_to_the_wall_time(dlrm: LoadedTrace) -> None:
    steps = dict(graph_tables(dlrm.analysis, "t", Detail.SUMMARY).phases)["load_steps"].columns
    for i, wall in enumerate(steps["wall_ms"]):
        assert sum(steps[f"{c.value}_ms"][i] for c in CATEGORIES) == pytest.approx(wall, abs=0.01)


def test_critical_next_chains_each_path_from_its_step(dlrm: LoadedTrace) -> None:
    cols = dict(graph_tables(dlrm.analysis, "t").phases)["load_critical_next"].columns
    report = dlrm.analysis.steps[0]
    k = len(report.path_node)
    key = step_key("t", report.step, report.rank)
    assert cols["path"][:k] == [key] * k and cols["pos"][:k] == list(range(k)) and cols["src"][0] is None
    assert cols["src"][1:k] == cols["dst"][: k - 1]  # each segment starts where the previous one ended
    assert all((d is None) == gap for d, gap in zip(cols["dst"][:k], cols["gap"][:k]))


def test_plan_changes_with_detail_and_batch_size(dlrm: LoadedTrace) -> None:
    full = graph_tables(dlrm.analysis, "t")
    assert full.plan(1000) == graph_tables(dlrm.analysis, "t").plan(1000)
    assert full.plan(1000) != full.plan(2000) != graph_tables(dlrm.analysis, "t", Detail.SUMMARY).plan(2000)
    assert sum(1 for _ in full.batches(5000)) == sum(-(-len(t) // 5000) for _, t in full.phases)
