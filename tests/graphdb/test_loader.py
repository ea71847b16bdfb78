"""Loading traces: idempotent, invisible until complete, resumed after a crash, at three detail levels.

The crash test kills the real FalkorDB server half-way through a load, after a snapshot holds
part of it, restarts it from that snapshot and loads again: one complete copy, nothing lost,
nothing doubled. Detail-level loads use their own trace ids so they never touch the copies the
conformance module reads.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import redis

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.errors import GraphStoreError
from bottleneck_oracle.graphdb import (
    Detail,
    GraphStore,
    delete_trace,
    list_traces,
    load_analysis,
    open_store,
    start_server,
    stop_server,
    trace_id,
)
from bottleneck_oracle.graphdb.queries import subgraph_query
from bottleneck_oracle.graphdb.server import START_HINT, server_status
from bottleneck_oracle.graphdb.tables import GraphTables, critical_nodes, graph_tables
from bottleneck_oracle.traces import read_trace
from tests.analysis.test_report import path_rows
from tests.conftest import WILD
from tests.graphdb.conftest import GPT, LoadedTrace, graph_settings


def _inventory(store: GraphStore, tid: str) -> dict[str, tuple[int, int]]:
    """(count, distinct keys) per label, and (count, 0) per relationship type, of one trace."""
    out: dict[str, tuple[int, int]] = {}
    for r in store.read("trace_inventory", {"trace": tid}):
        n, distinct = out.get(r["what"], (0, 0))
        out[r["what"]] = (n + int(r["n"]), distinct + int(r["distinct_keys"]))
    return {k: v for k, v in out.items() if v[0]}


def _expected_inventory(tables: GraphTables) -> dict[str, int]:
    """What a complete load of ``tables`` holds, per label and relationship type."""
    sizes = {name: len(t) for name, t in tables.phases}
    out = {"Rank": sizes.get("load_ranks", 0), "Step": sizes.get("load_steps", 0),
           "Op": sizes.get("load_ops", 0) + sizes.get("load_loose_ops", 0),
           "Collective": sizes.get("load_collectives", 0), "Finding": sizes.get("load_findings", 0),
           "IN_TRACE": sizes.get("load_ranks", 0), "ON_RANK": sizes.get("load_steps", 0),
           "IN_STEP": sizes.get("load_ops", 0), "MEMBER_OF": sizes.get("load_member_of", 0),
           "CRITICAL_NEXT": sizes.get("load_critical_next", 0), "EXPLAINS": sizes.get("load_explains", 0)}
    out |= {name.removeprefix("load_edges_").upper(): n for name, n in sizes.items() if name.startswith("load_edges_")}
    return {k: v for k, v in out.items() if v}


def _assert_one_complete_copy(store: GraphStore, tid: str, tables: GraphTables) -> None:
    inventory = _inventory(store, tid)
    assert {k: n for k, (n, _) in inventory.items()} == _expected_inventory(tables)
    assert all(distinct == n for k, (n, distinct) in inventory.items() if k[0].isupper() and k[1:].islower())


def test_trace_id_is_a_hash_of_the_file_contents(tmp_path: Path) -> None:
    copy = tmp_path / "renamed_folder"
    shutil.copytree(GPT, copy)
    assert trace_id(read_trace(copy, workers=1)) == trace_id(read_trace(GPT, workers=1))
    (copy / "manifest.json").unlink()  # not a trace file: not part of the id
    assert trace_id(read_trace(copy, workers=1)) == trace_id(read_trace(GPT, workers=1))


def test_loading_twice_leaves_one_copy(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    before = _inventory(store, t.trace_id)
    report = load_analysis(store, t.analysis, trace_id=t.trace_id, name=t.name)
    assert report.outcome == "unchanged" and report.batches == 0
    assert _inventory(store, t.trace_id) == before
    _assert_one_complete_copy(store, t.trace_id, graph_tables(t.analysis, t.trace_id))


def test_a_batch_sent_twice_is_applied_once(store: GraphStore, analyses: dict[str, LoadedTrace]) -> None:
    t = analyses["cp_simple_add"]
    tid = f"{t.trace_id}-twice"
    tables = graph_tables(t.analysis, tid, Detail.SUMMARY)

    def stop_after_one(done: int, total: int) -> None:
        raise KeyboardInterrupt  # the loader dies after the first batch committed

    with pytest.raises(KeyboardInterrupt):
        load_analysis(store, t.analysis, trace_id=tid, name=t.name, detail=Detail.SUMMARY, progress=stop_after_one)
    name, columns = next(tables.batches(10_000, 0))
    head = f"{tid}:{tables.plan(10_000)}:head"
    again = store.write(name, {"trace": tid, "part": head, "cursor": 0, **columns})  # the load's first batch, re-sent
    assert again.rows == () and again.nodes_created == 0
    report = load_analysis(store, t.analysis, trace_id=tid, name=t.name, detail=Detail.SUMMARY)
    assert (report.outcome, report.resumed_after) == ("resumed", 0)
    _assert_one_complete_copy(store, tid, tables)
    parts = store.read("load_parts", {"trace": tid})  # each part's cursor at its last batch
    assert [r["cursor"] + 1 for r in parts] == tables.batch_counts(10_000)
    assert delete_trace(store, tid) and not _inventory(store, tid)
    assert not delete_trace(store, tid)


def test_an_interrupted_load_is_invisible_then_finished(store: GraphStore, analyses: dict[str, LoadedTrace]) -> None:
    t = analyses["gpt_2rank"]
    tid = f"{t.trace_id}-interrupted"

    def stop_after_five(done: int, total: int) -> None:
        if done == 5:
            raise KeyboardInterrupt  # the loader dies between two batches

    with pytest.raises(KeyboardInterrupt):
        load_analysis(store, t.analysis, trace_id=tid, name=t.name, batch_size=2_000, progress=stop_after_five)
    assert store.read("trace_steps", {"trace": tid}) == []
    assert store.read("critical_path", {"trace": tid, "step": 5, "rank": 1}) == []
    assert next(x for x in list_traces(store) if x.trace_id == tid).status == "loading"
    report = load_analysis(store, t.analysis, trace_id=tid, name=t.name, batch_size=2_000)
    assert (report.outcome, report.resumed_after) == ("resumed", 4)
    _assert_one_complete_copy(store, tid, graph_tables(t.analysis, tid))
    assert len(store.read("trace_steps", {"trace": tid})) == len(t.analysis.steps)
    delete_trace(store, tid)


def test_server_killed_during_a_load_then_a_new_load(tmp_path: Path, analyses: dict[str, LoadedTrace]) -> None:
    """Kill -9 half-way (after a snapshot holding part of the load), restart, load again."""
    t = analyses["gpt_2rank"]
    settings = graph_settings(tmp_path, "falkordb", "crash")
    info = start_server(tmp_path)
    store = open_store(settings)
    store.apply_schema()

    def snapshot_then_kill(done: int, total: int) -> None:
        if done == 12:
            with redis.Redis(port=info.port, password=info.password) as r:
                r.save()  # the RDB on disk now holds batches 0..11 and cursor 11
            os.kill(info.pid, signal.SIGKILL)

    with pytest.raises(GraphStoreError) as down:
        load_analysis(store, t.analysis, trace_id=t.trace_id, name=t.name, batch_size=2_000,
                      progress=snapshot_then_kill)
    assert START_HINT in str(down.value)
    with pytest.raises(GraphStoreError) as query_down:  # the server down at query time
        store.read("trace_list")
    assert "not reachable" in str(query_down.value) and START_HINT in str(query_down.value)
    store.close()

    assert server_status(tmp_path) is None
    start_server(tmp_path)
    with open_store(settings) as store:
        half = _inventory(store, t.trace_id)
        assert 0 < half["Op"][0] < len(t.analysis.graph)  # part of the ops survived in the snapshot
        assert list_traces(store)[0].status == "loading"
        assert store.read("trace_steps", {"trace": t.trace_id}) == []  # a half trace never looks whole
        report = load_analysis(store, t.analysis, trace_id=t.trace_id, name=t.name, batch_size=2_000)
        assert (report.outcome, report.resumed_after) == ("resumed", 11)
        _assert_one_complete_copy(store, t.trace_id, graph_tables(t.analysis, t.trace_id))
        path = path_rows(analysis_to_dict(t.analysis, step=5, rank=1, full_paths=True)["steps"][0]["critical_path"])
        rows = store.read("critical_path", {"trace": t.trace_id, "step": 5, "rank": 1})
        assert [(r["name"], r["contrib_us"]) for r in rows] == [(e["name"], e["contrib_us"]) for e in path]
    stop_server(tmp_path)


def test_loading_at_another_detail_replaces_the_copy(store: GraphStore, analyses: dict[str, LoadedTrace]) -> None:
    t = analyses["gpt_2rank"]
    tid = f"{t.trace_id}-redetail"
    load_analysis(store, t.analysis, trace_id=tid, name=t.name, detail=Detail.SUMMARY)
    report = load_analysis(store, t.analysis, trace_id=tid, name=t.name, detail=Detail.CRITICAL, hops=1)
    assert report.outcome == "loaded"
    _assert_one_complete_copy(store, tid, graph_tables(t.analysis, tid, Detail.CRITICAL, 1))
    delete_trace(store, tid)


def test_critical_detail_answers_like_full(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    hops = 1
    t = loaded["dlrm_8rank_kineto"]
    tid = f"{t.trace_id}-critical{hops}"
    load_analysis(store, t.analysis, trace_id=tid, name=t.name, detail=Detail.CRITICAL, hops=hops)
    tables = graph_tables(t.analysis, tid, Detail.CRITICAL, hops)
    _assert_one_complete_copy(store, tid, tables)
    assert tables.loaded[critical_nodes(t.analysis.steps)].all() and tables.loaded.sum() < len(t.analysis.graph)
    for query, params in [
        ("critical_path", {"step": 10, "rank": 3}), ("top_critical_ops", {"step": 10, "rank": 3, "k": 10}),
        ("collective_stragglers", {"step": 10}), ("step_findings", {"step": 10}), ("trace_steps", {}),
        (subgraph_query(hops), {"step": 10, "rank": 3}),
    ]:
        full = store.read(query, {"trace": t.trace_id, **params})
        partial = store.read(query, {"trace": tid, **params})
        strip = lambda rows: [{k: v for k, v in r.items() if k not in ("op_key", "key")} for r in rows]  # noqa: E731
        assert strip(partial) == strip(full), query
    delete_trace(store, tid)


def test_summary_detail_keeps_steps_and_findings(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    tid = f"{t.trace_id}-summary"
    report = load_analysis(store, t.analysis, trace_id=tid, name=t.name, detail=Detail.SUMMARY)
    assert report.nodes == 1 + 2 + len(t.analysis.steps) + len(t.analysis.findings)
    assert "Op" not in _inventory(store, tid)
    assert store.read("trace_steps", {"trace": tid}) == store.read("trace_steps", {"trace": t.trace_id})
    assert store.read("step_findings", {"trace": tid, "step": 5}) == \
        store.read("step_findings", {"trace": t.trace_id, "step": 5})
    assert store.read("critical_path", {"trace": tid, "step": 5, "rank": 1}) == []
    delete_trace(store, tid)


def test_graph_tables_count_what_a_load_creates(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["dlrm_8rank_kineto"]
    tables = graph_tables(t.analysis, t.trace_id)
    inventory = _inventory(store, t.trace_id)
    assert sum(n for k, (n, _) in inventory.items() if k[0].isupper() and k[1:].islower()) + 1 == tables.nodes
    assert sum(n for k, (n, _) in inventory.items() if k.isupper()) == tables.relationships
    assert np.array_equal(tables.loaded, np.ones(len(t.analysis.graph), dtype=bool))


def test_a_delete_that_stopped_half_way_is_loaded_afresh(store: GraphStore, analyses: dict[str, LoadedTrace]) -> None:
    t = analyses["cp_simple_add"]
    tid = f"{t.trace_id}-hidden"
    load_analysis(store, t.analysis, trace_id=tid, name=t.name)
    store.write("trace_hide", {"trace": tid})  # delete_trace's first step, then a crash
    assert store.read("trace_steps", {"trace": tid}) == []
    assert load_analysis(store, t.analysis, trace_id=tid, name=t.name).outcome == "loaded"
    _assert_one_complete_copy(store, tid, graph_tables(t.analysis, tid))
    delete_trace(store, tid)


def test_step_nodes_carry_the_gpu_timeline_and_verdict(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    trace = read_trace([WILD / "tracelens" / "h100" / "qwen1.5_0.5b_chat" / "trace.json.gz"])
    a, tid = analyze(trace), f"{trace_id(trace)}-gpu"
    load_analysis(store, a, trace_id=tid, name="qwen", detail=Detail.SUMMARY)
    try:
        (row,) = store.read("trace_steps", {"trace": tid})
        d = analysis_to_dict(a)
        (step,), (bound,) = d["steps"], d["gpu_bound"]  # what `oracle analyze --json` says of the step
        assert {k: row[f"gpu_{k}"] for k in step["gpu"] if k != "total_ms"} == pytest.approx(
            {k: v for k, v in step["gpu"].items() if k != "total_ms"}, abs=1e-6)
        assert row["gpu_bound"] is True and row["gpu_busy_pct"] == bound["busy_pct"]
        assert row["gpu_evidence"] == bound["evidence"]
        assert list(zip(row["gpu_op_classes"], row["gpu_op_classes_ms"])) == [
            (c["class"], c["ms"]) for c in bound["op_classes"]]
    finally:
        delete_trace(store, tid)
    gpt = loaded["gpt_2rank"]  # a CPU-only capture: no GPU values at all
    rows = store.read("trace_steps", {"trace": gpt.trace_id})
    assert rows and all(r["gpu_busy_ms"] is None and r["gpu_bound"] is None for r in rows)
