"""The GraphStore contract: every query of the library answers what the in-memory analysis says.

One module, run against every backend the ``store`` fixture provides (FalkorDB always, Neo4j
when NEO4J_URI is set). Traces: a real HTA trace, the real 2-rank GPT capture with a straggler
in step 5, and the real 8-rank DLRM job.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, GraphStoreError, QueryError
from bottleneck_oracle.graph.collectives import collective_arrivals
from bottleneck_oracle.graph.types import NodeKind
from bottleneck_oracle.graphdb import Capability, GraphStore, list_traces, open_store
from bottleneck_oracle.graphdb.queries import Mode, Query, get_query, subgraph_query
from bottleneck_oracle.graphdb.schema import DAG_RELS
from bottleneck_oracle.graphdb.server import START_HINT, server_status
from bottleneck_oracle.graphdb.tables import critical_nodes, expand_hops
from tests.analysis.test_report import path_rows
from tests.graphdb.conftest import LoadedTrace

NAMES = ["gpt_2rank", "dlrm_8rank_kineto", "cp_simple_add"]
UNLIMITED = 1_000_000


def _close(a: float, b: float, rel: float = 1e-12, abs_: float = 2e-3) -> bool:
    return abs(a - b) <= max(abs_, rel * abs(b))


def _report_steps(a: Analysis) -> list[tuple[int, int]]:
    return [(r.step, r.rank) for r in a.steps]


def test_store_is_a_graph_store(store: GraphStore) -> None:
    assert isinstance(store, GraphStore)
    assert Capability.VECTOR_SEARCH in store.capabilities


@pytest.mark.parametrize("name", NAMES)
def test_trace_steps_match_the_analysis(store: GraphStore, loaded: dict[str, LoadedTrace], name: str) -> None:
    t = loaded[name]
    expected = analysis_to_dict(t.analysis)["steps"]
    rows = store.read("trace_steps", {"trace": t.trace_id})
    assert [(r["step"], r["rank"]) for r in rows] == [(s["step"], s["rank"]) for s in expected]
    for row, exp in zip(rows, expected):
        assert row["wall_ms"] == pytest.approx(exp["wall_ms"], abs=1e-9)
        assert row["critical_path_ms"] == pytest.approx(exp["critical_path_ms"], abs=1e-9)
        assert (row["slow"], row["partial"]) == (exp["slow"], exp["partial"])
        for category, ms in exp["breakdown_ms"].items():
            assert row[f"{category}_ms"] == pytest.approx(ms, abs=1e-9)


def test_slow_steps_match_the_analysis(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    rows = store.read("slow_steps", {"trace": t.trace_id})
    expected = sorted(t.analysis.slow_steps, key=lambda s: (-s.excess_ns, s.step, s.rank))
    assert [(r["step"], r["rank"]) for r in rows] == [(s.step, s.rank) for s in expected] == [(5, 1), (5, 0)]
    assert rows[0]["excess_ms"] == pytest.approx(expected[0].excess_ns / 1e6, abs=1e-3)


@pytest.mark.parametrize("name,views", [("gpt_2rank", [(2, 0), (5, 0), (5, 1)]),
                                        ("dlrm_8rank_kineto", [(10, 0), (10, 7)]),
                                        ("cp_simple_add", [(-1, 0)])])
def test_critical_path_matches(store: GraphStore, loaded: dict[str, LoadedTrace], name: str,
                               views: list[tuple[int, int]]) -> None:
    t = loaded[name]
    for exp in analysis_to_dict(t.analysis, full_paths=True)["steps"]:
        if (exp["step"], exp["rank"]) not in views:
            continue
        rows = store.read("critical_path", {"trace": t.trace_id, "step": exp["step"], "rank": exp["rank"]})
        path = path_rows(exp["critical_path"])
        assert [r["pos"] for r in rows] == list(range(len(path)))
        assert [(r["name"], r["kind"], r["category"], r["rank"]) for r in rows] == \
            [(e["name"], e["kind"], e["category"], e["rank"]) for e in path]
        for r, e in zip(rows, path):
            assert _close(r["ts_us"], e["ts_us"], rel=1e-14) and _close(r["dur_us"], e["dur_us"])
            assert r["contrib_us"] == pytest.approx(e["contrib_us"], abs=1e-6)
        assert sum(r["contrib_us"] for r in rows) / 1000 == pytest.approx(exp["wall_ms"], abs=1e-3)


def _contributions(a: Analysis, step: int, rank: int) -> dict[int, float]:
    report = next(r for r in a.steps if (r.step, r.rank) == (step, rank))
    out: dict[int, float] = defaultdict(float)
    for node, dur in zip(report.path_node.tolist(), report.path_dur_ns.tolist()):
        if node >= 0:
            out[node] += dur / 1000
    return out


@pytest.mark.parametrize("name", NAMES)
def test_top_critical_ops_match(store: GraphStore, loaded: dict[str, LoadedTrace], name: str) -> None:
    t = loaded[name]
    step, rank = _report_steps(t.analysis)[-1]
    expected = _contributions(t.analysis, step, rank)
    rows = store.read("top_critical_ops", {"trace": t.trace_id, "step": step, "rank": rank, "k": 10})
    assert [r["contrib_us"] for r in rows] == pytest.approx(sorted(expected.values(), reverse=True)[:10], abs=1e-6)
    for r in rows:
        assert r["contrib_us"] == pytest.approx(expected[r["idx"]], abs=1e-6)
        assert r["name"] == t.analysis.graph.node_name(r["idx"])


def test_compare_steps_matches_op_class_by_op_class(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    g = t.analysis.graph
    expected: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0])
    step, rank = g.step, g.rank
    for col, s in ((0, 4), (1, 5)):
        for node in np.flatnonzero((step == s) & (rank == 1)).tolist():
            cls = (NodeKind(g.kind[node]).name.lower(), g.node_name(node))
            expected[cls][col] += 1
            expected[cls][2 + col] += g.dur_ns[node] / 1000
    rows = store.read("compare_steps", {"trace": t.trace_id, "rank": 1, "step_a": 4, "step_b": 5, "k": UNLIMITED})
    assert {(r["kind"], r["name"]) for r in rows} == set(expected)
    for r in rows:
        count_a, count_b, dur_a, dur_b = expected[(r["kind"], r["name"])]
        assert (r["count_a"], r["count_b"]) == (count_a, count_b)
        assert r["dur_a_us"] == pytest.approx(dur_a, abs=1e-3) and r["dur_b_us"] == pytest.approx(dur_b, abs=1e-3)
    deltas = [abs(r["delta_us"]) for r in rows]
    assert deltas == sorted(deltas, reverse=True)


@pytest.mark.parametrize("name,step,straggler", [("gpt_2rank", 5, 1), ("dlrm_8rank_kineto", 10, 7)])
def test_slowest_rank_per_collective_matches(store: GraphStore, loaded: dict[str, LoadedTrace], name: str,
                                             step: int, straggler: int) -> None:
    t = loaded[name]
    expected = {c.instance: c for c in collective_arrivals(t.analysis.graph) if c.step == step}
    rows = store.read("collective_stragglers", {"trace": t.trace_id, "step": step})
    assert {r["instance"] for r in rows} == set(expected)
    for r in rows:
        c = expected[r["instance"]]
        assert (r["slowest_rank"], r["members"], r["kind"]) == (c.last_rank, len(c.members), c.kind)
        assert r["lateness_us"] == pytest.approx(c.lateness_ns / 1000, abs=2e-3)
    assert rows[0]["slowest_rank"] == straggler  # the latest arrival of the step is the straggler's


@pytest.mark.parametrize("name", NAMES)
def test_findings_of_each_step_match(store: GraphStore, loaded: dict[str, LoadedTrace], name: str) -> None:
    t = loaded[name]
    a = t.analysis
    for step in sorted({r.step for r in a.steps}):
        expected = [f for f in a.findings if f.step in (step, None)
                    and any(r.rank in f.ranks and r.step == step for r in a.steps)]
        rows = store.read("step_findings", {"trace": t.trace_id, "step": step})
        assert [(r["category"], r["step"], list(r["ranks"]), list(r["ops"]), r["severity"]) for r in rows] == \
            [(f.category.value, f.step, list(f.ranks), list(f.ops), f.severity) for f in expected]
        assert [r["impact_ms"] for r in rows] == pytest.approx([f.impact_ms for f in expected])
    if name == "gpt_2rank":
        categories = {r["category"] for r in store.read("step_findings", {"trace": t.trace_id, "step": 5})}
        assert "straggler_rank" in categories
        # step 7 is not slow: what stands out there is stored as minor, not as a cause
        assert {r["severity"] for r in store.read("step_findings", {"trace": t.trace_id, "step": 7})} <= {"minor"}


def test_ops_by_name_match(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["dlrm_8rank_kineto"]
    g = t.analysis.graph
    names = np.asarray(g.trace.strings, dtype=object)[g.name]
    hits = [i for i, n in enumerate(names.tolist()) if "allreduce" in n.lower()]
    expected = sorted(hits, key=lambda i: (-int(g.dur_ns[i]), i))[:20]
    rows = store.read("ops_by_name", {"trace": t.trace_id, "pattern": "AllReduce", "limit": 20})
    assert expected and [r["idx"] for r in rows] == expected


def test_ops_of_a_step_by_name_match(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    g = t.analysis.graph
    names = np.asarray(g.trace.strings, dtype=object)[g.name]
    hits = [i for i, n in enumerate(names.tolist()) if "all_reduce" in n.lower() and g.step[i] == 5]
    expected = sorted(hits, key=lambda i: (-int(g.dur_ns[i]), i))
    rows = store.read("step_ops_by_name", {"trace": t.trace_id, "step": 5, "pattern": "ALL_REDUCE", "limit": 100})
    assert expected and [r["idx"] for r in rows] == expected


def _hop_distance(a: Analysis, step: int, rank: int, hops: int) -> dict[int, int]:
    report = next(r for r in a.steps if (r.step, r.rank) == (step, rank))
    seed = critical_nodes([report])
    out: dict[int, int] = {}
    for h in range(hops + 1):
        for node in np.flatnonzero(expand_hops(a, seed, h)).tolist():
            out.setdefault(node, h)
    return out


@pytest.mark.parametrize("hops", [0, 1, 2])
def test_critical_subgraph_matches(store: GraphStore, loaded: dict[str, LoadedTrace], hops: int) -> None:
    t = loaded["dlrm_8rank_kineto"]
    rows = store.read(subgraph_query(hops), {"trace": t.trace_id, "step": 10, "rank": 0})
    assert {r["idx"]: r["hops"] for r in rows} == _hop_distance(t.analysis, 10, 0, hops)


def test_subgraph_edges_match(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    g = t.analysis.graph
    nodes = sorted(_hop_distance(t.analysis, 5, 1, 1))
    keys = [f"{t.trace_id}:{n}" for n in nodes]
    rows = store.read("subgraph_edges", {"trace": t.trace_id, "keys": keys})
    inside = np.zeros(len(g), dtype=bool)
    inside[nodes] = True
    mask = inside[g.edge_src] & inside[g.edge_dst]
    expected = Counter((int(s), DAG_RELS[e].value, int(d)) for s, d, e in
                       zip(g.edge_src[mask], g.edge_dst[mask], g.edge_type[mask].tolist()))
    assert Counter((r["src"], r["type"], r["dst"]) for r in rows) == expected


def test_list_traces_shows_them_complete(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    listed = {t.trace_id: t for t in list_traces(store)}
    for t in loaded.values():
        assert listed[t.trace_id].status == "complete"
        assert listed[t.trace_id].steps == len(t.analysis.steps)
        assert listed[t.trace_id].ops == len(t.analysis.graph)


def test_read_path_refuses_a_write_query(store: GraphStore) -> None:
    with pytest.raises(QueryError) as refused:
        store.read("trace_remove", {"trace": "x"})
    assert "read-only path refuses" in str(refused.value)


def test_server_refuses_a_write_sent_as_a_read(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    if Capability.READ_ONLY_ENFORCED not in store.capabilities:
        pytest.skip("the backend does not enforce read-only reads")
    sneaky = Query(name="sneaky", text="MATCH (t:Trace) SET t.status = 'hacked' RETURN t.id AS id",
                   mode=Mode.READ, backend=None, params=(), returns=("id",), summary="", guarded=False)
    with pytest.raises(QueryError):
        store.read(sneaky)
    assert all(t.status == "complete" for t in list_traces(store) if t.trace_id in
               {x.trace_id for x in loaded.values()})


def test_unknown_query_and_missing_parameters_are_refused(store: GraphStore) -> None:
    with pytest.raises(QueryError):
        store.read("no_such_query")
    with pytest.raises(QueryError) as missing:
        store.read("critical_path", {"trace": "x"})
    assert "step, rank" in str(missing.value)


def test_write_path_refuses_a_read_query(store: GraphStore) -> None:
    with pytest.raises(QueryError):
        store.write(get_query("trace_list", store.backend))


def test_open_store_without_a_running_server_says_how_to_start_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GraphStoreError) as down:
        open_store(Settings(home=tmp_path, workers=1))
    assert START_HINT in str(down.value)


def test_open_store_refuses_an_unknown_url(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError):
        open_store(Settings(home=tmp_path, workers=1, graph_url="mongodb://localhost"))


def test_open_store_by_falkordb_url(graph_home) -> None:  # type: ignore[no-untyped-def]
    info = server_status(graph_home)
    assert info is not None
    url = f"falkordb://:{info.password}@127.0.0.1:{info.port}/url_test"
    with open_store(Settings(home=graph_home, workers=1, graph_url=url)) as store:
        assert Capability.MANAGED_SERVER not in store.capabilities  # a server of one's own, not started by us
        store.apply_schema()
        assert store.read("trace_list") == []
