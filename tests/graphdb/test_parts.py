"""A load by parts: the parts hold the trace once, a rank's part only its own rows; the ranks' parts loaded as Ray tasks, each on its own connection, give the graph the
load in one process gives, node for node and relationship for relationship; a task whose worker is
killed runs again and resumes its part; a load whose server restarts mid-part waits and resumes."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import falkordb
import numpy as np
import pytest
import redis

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import load_analysis, loader, open_store, server_status, start_server, stop_server
from bottleneck_oracle.graphdb.server import HOST
from bottleneck_oracle.graphdb.parts import PART_OPS
from bottleneck_oracle.graphdb.tables import graph_tables
from bottleneck_oracle.graphdb.types import Detail
from bottleneck_oracle.workspace.ingest import _rank_loader
from tests.conftest import one_ray_task_killed
from tests.graphdb.conftest import LoadedTrace


@pytest.mark.parametrize(("detail", "part_ops"), [(Detail.FULL, 1), (Detail.FULL, 5_000), (Detail.FULL, PART_OPS),
                                                (Detail.CRITICAL, 1)])
def test_the_parts_hold_whole_ranks_and_each_edge_once(analyses: dict[str, LoadedTrace], detail: Detail,
                                                       part_ops: int) -> None:
    """The parts together are the trace: consecutive whole ranks, as many as make ``part_ops`` ops, each
    edge once, in a part only when both its ends are ops of one of its ranks, else in the tail (loaded
    after every part of the ranks)."""
    dlrm = analyses["dlrm_8rank_kineto"]
    g = dlrm.analysis.graph
    tables = graph_tables(dlrm.analysis, "t", detail, part_ops=part_ops)
    ops_per_rank = np.bincount(g.rank[tables.loaded])
    seen_ops: list[int] = []
    seen_ranks: list[int] = []
    seen_edges: set[tuple[int, int, str]] = set()
    for part in range(1, len(tables.parts) - 1):
        phases = tables.part_phases(part)
        assert [(n, len(t)) for n, t in phases] == tables.sizes()[part]
        ranks = sorted({r for n, t in phases if n in ("load_ops", "load_loose_ops") for r in t.columns["rank"]})
        first, _, last = tables.parts[part].removeprefix("ranks").removeprefix("rank").partition("-")
        assert ranks == list(range(int(first), int(last or first) + 1))
        assert len(ranks) == 1 or ops_per_rank[ranks[:-1]].sum() < part_ops  # it closes once it has part_ops
        seen_ranks += ranks
        for name, t in phases:
            if name in ("load_ops", "load_loose_ops"):
                seen_ops += t.columns["idx"]
            elif name == "load_member_of":
                assert set(g.rank[t.columns["op"]].tolist()) <= set(ranks)
            else:
                src, dst = np.array(t.columns["src"]), np.array(t.columns["dst"])
                assert (g.rank[src] == g.rank[dst]).all() and set(g.rank[src].tolist()) <= set(ranks)
                seen_edges |= {(s, d, name) for s, d in zip(src.tolist(), dst.tolist())}
    assert seen_ranks == list(range(8))  # every rank in one part, in order
    assert part_ops > 1 or tables.parts[1:-1] == [f"rank{r}" for r in range(8)]
    assert sorted(seen_ops) == np.flatnonzero(tables.loaded).tolist()
    assert any(name.startswith("load_edges_") for name, _ in tables.tail)  # DLRM's collectives join ranks
    for name, t in tables.tail:
        if name.startswith("load_edges_"):
            src, dst = np.array(t.columns["src"]), np.array(t.columns["dst"])
            assert (g.rank[src] != g.rank[dst]).all()
            seen_edges |= {(s, d, name) for s, d in zip(src.tolist(), dst.tolist())}
    loaded = tables.loaded[g.edge_src] & tables.loaded[g.edge_dst]
    assert len(seen_edges) == int(loaded.sum())


def test_fewer_larger_parts_send_fewer_batches(analyses: dict[str, LoadedTrace]) -> None:
    a = analyses["dlrm_8rank_kineto"].analysis
    one_per_rank, default = graph_tables(a, "t", part_ops=1), graph_tables(a, "t")
    assert len(one_per_rank.parts) == 10 and len(default.parts) == 3  # 19,781 ops: one part of the ranks
    assert sum(default.batch_counts(2_000)) < sum(one_per_rank.batch_counts(2_000))
    assert one_per_rank.nodes == default.nodes and one_per_rank.relationships == default.relationships


def _dump(home: Path, graph: str, tid: str) -> list[str]:
    """Every node and relationship of a trace with all its properties, the trace id replaced, sorted:
    two loads of one analysis under two ids give the same list."""
    info = server_status(home)
    assert info is not None
    g = falkordb.FalkorDB(host=HOST, port=info.port, password=info.password).select_graph(graph)

    def plain(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(tid, "T")
        if isinstance(value, dict):
            return {k: plain(v) for k, v in sorted(value.items())}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    nodes = g.ro_query("MATCH (n) WHERE n.trace = $t AND NOT n:LoadPart RETURN labels(n)[0], properties(n)",
                       {"t": tid}).result_set  # a LoadPart is the load's bookkeeping: its key names the plan
    rels = g.ro_query("MATCH (a)-[r]->(b) WHERE a.trace = $t RETURN a.key, type(r), b.key, properties(r)",
                      {"t": tid}).result_set
    return sorted(repr(plain(row)) for row in [*nodes, *rels])


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("parallel_load")
    start_server(path)
    yield path
    stop_server(path)


def test_a_load_whose_server_restarts_mid_part_waits_and_resumes(tmp_path: Path, analyses: dict[str, LoadedTrace],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # up to 15.5 s for the server to come back: a restart on two loaded cores can outlast the 3.5 s users get
    monkeypatch.setattr(loader, "RETRY_WAIT_S", (0.5, 1.0, 2.0, 4.0, 8.0))
    t = analyses["gpt_2rank"]
    settings = Settings(home=tmp_path, workers=1, graph_name="restart")
    info = start_server(tmp_path)
    restarted: list[int] = []

    def snapshot_kill_restart(done: int, total: int) -> None:
        if done == 12:
            with redis.Redis(port=info.port, password=info.password) as r:
                r.save()  # the restarted server holds batches 0..11
            os.kill(info.pid, signal.SIGKILL)
            restart = lambda: (time.sleep(0.2), restarted.append(start_server(tmp_path).port))  # noqa: E731
            threading.Thread(target=restart).start()

    try:
        with open_store(settings) as store:
            store.apply_schema()
            report = load_analysis(store, t.analysis, trace_id=t.trace_id, name=t.name, batch_size=2_000,
                                   progress=snapshot_kill_restart)
            assert restarted == [info.port]  # the same port: the store's connection finds it again
            assert report.outcome == "loaded" and report.retries >= 1
            assert report.nodes_created == report.nodes - 1  # every node once, though the server lost none
            alone = load_analysis(store, t.analysis, trace_id=f"{t.trace_id}-alone", name=t.name)
        assert _dump(tmp_path, "restart", t.trace_id) == _dump(tmp_path, "restart", alone.trace_id)
    finally:
        stop_server(tmp_path)


def test_the_ranks_load_as_ray_tasks_only_where_the_tasks_reach_the_database(tmp_path: Path) -> None:
    said: list[str] = []
    local = Settings(home=tmp_path, workers=1)
    assert _rank_loader(local, said.append) is None  # the local executor: rank after rank in this process
    ray_here = Settings(home=tmp_path, workers=1, executor="ray")
    assert type(_rank_loader(ray_here, said.append)).__name__ == "RayExecutor" and not said
    cluster = Settings(home=tmp_path, workers=1, executor="ray", ray_address="head:6379")
    assert _rank_loader(cluster, said.append) is None
    assert said and "cannot reach the workspace's embedded database" in said[0]
    remote = Settings(home=tmp_path, workers=1, executor="ray", ray_address="head:6379", graph_url="falkordb://db:6379")
    assert type(_rank_loader(remote, said.append)).__name__ == "RayExecutor"


@pytest.mark.slow
def test_ray_tasks_load_the_same_graph_and_a_killed_worker_changes_nothing(
        ray_cluster, home: Path, analyses: dict[str, LoadedTrace]) -> None:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.executor import RayExecutor

    t = analyses["dlrm_8rank_kineto"]
    settings = Settings(home=home, workers=1, graph_name="parallel")
    with open_store(settings) as store:
        store.apply_schema()
        small = {"batch_size": 500, "part_ops": 2_000}  # 8 parts of the ranks (one each), 19 batches each
        here = load_analysis(store, t.analysis, trace_id=f"{t.trace_id}-here", name=t.name, **small)
        on_ray = load_analysis(store, t.analysis, trace_id=f"{t.trace_id}-ray", name=t.name,
                               executor=RayExecutor(), settings=settings, **small)
        with one_ray_task_killed(after_s=0.1) as killed:  # into its part: some batches committed
            retried = load_analysis(store, t.analysis, trace_id=f"{t.trace_id}-killed", name=t.name,
                                    executor=RayExecutor(), settings=settings, **small)
    assert killed, "no worker was caught loading a part"
    assert (here.nodes, here.relationships) == (on_ray.nodes, on_ray.relationships) == (retried.nodes, retried.relationships)
    assert here.nodes_created == on_ray.nodes_created == here.nodes - 1
    dumped = _dump(home, "parallel", here.trace_id)
    assert len(dumped) == here.nodes - 1 + here.relationships
    assert _dump(home, "parallel", on_ray.trace_id) == dumped
    assert _dump(home, "parallel", retried.trace_id) == dumped
