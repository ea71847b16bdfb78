"""Benchmark: loading a 1M-op trace into the embedded FalkorDB, and the agent's query latencies.

Measured in one run, on one freshly started embedded server (``start_server``) in
``benchmarks/.work/graphdb_home``:
  - load throughput (nodes/s, relationships/s) of ``load_analysis`` at each detail level
    (summary, critical with 1 hop, full) of the 1M-event DLRM trace (``make_large_trace.py``),
    each into a fresh graph with the schema applied;
  - the ceiling, in the same run: FalkorDB's own bulk ``UNWIND ... CREATE`` of the same op columns
    (no key, no constraint, no progress mark) and of the same DAG edges between nodes found by an
    indexed integer (``bulk_create_ops``, ``bulk_create_edges`` of the query library);
  - query latency (p50, p95 over repeated runs) of the agent's queries on the full load, against
    the round trip of a one-row index lookup (``trace_state``) as the floor.
Prints ratios (ours / ceiling, query / floor) and writes ``benchmarks/.work/bench_graphdb.json``.
Usage: ``python benchmarks/bench_graphdb.py [--runs N] [--skip-full]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_large_trace import DEFAULT_OUT, DEFAULT_SRC, make_large_trace  # noqa: E402

from bottleneck_oracle.analysis.analysis import Analysis, analyze  # noqa: E402
from bottleneck_oracle.config import Settings  # noqa: E402
from bottleneck_oracle.graphdb import (  # noqa: E402
    Detail,
    GraphStore,
    load_analysis,
    open_store,
    start_server,
    stop_server,
    trace_id,
)
from bottleneck_oracle.graphdb.embedding import Embedder  # noqa: E402
from bottleneck_oracle.graphdb.playbook import ensure_playbook, read_playbook  # noqa: E402
from bottleneck_oracle.graphdb.queries import subgraph_query  # noqa: E402
from bottleneck_oracle.graphdb.server import ServerInfo  # noqa: E402
from bottleneck_oracle.graphdb.tables import graph_tables  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402

WORK = Path(__file__).resolve().parent / ".work"
HOME = WORK / "graphdb_home"
BATCH = 10_000


def _used_mb(info: ServerInfo) -> float:
    with redis.Redis(port=info.port, password=info.password) as r:
        return int(r.info("memory")["used_memory"]) / 2**20


def _drop(info: ServerInfo, graph: str) -> None:
    with redis.Redis(port=info.port, password=info.password) as r:
        r.execute_command("GRAPH.DELETE", graph)


_GROUPS = {"load_ops": "ops", "load_loose_ops": "ops", "load_critical_next": "critical_next"}


def _group(phase: str) -> str:
    return "dag_edges" if phase.startswith("load_edges_") else _GROUPS.get(phase, "other")


def bench_load(info: ServerInfo, a: Analysis, tid: str, detail: Detail) -> dict[str, Any]:
    """One load, timed batch by batch: ops (with their IN_STEP), DAG edges, critical-path chains."""
    graph = f"bench_{detail.value}"
    tables = graph_tables(a, tid, detail, 1)
    batches = [b for part in range(len(tables.parts)) for b in tables.batches(BATCH, part)]  # in load order
    phases = [name for name, _ in batches]
    rows = [len(next(iter(cols.values()))) for _, cols in batches]
    del batches
    stamps: list[float] = []
    with open_store(Settings(home=HOME, workers=2, graph_name=graph)) as store:
        store.apply_schema()
        started = time.perf_counter()
        report = load_analysis(store, a, trace_id=tid, name="dlrm_8rank_1m", detail=detail, hops=1,
                               batch_size=BATCH, progress=lambda done, total: stamps.append(time.perf_counter()))
        seconds = time.perf_counter() - started
    spent: dict[str, list[float]] = {}
    for phase, n, begin, end in zip(phases, rows, [started, *stamps[:-1]], stamps):
        group = spent.setdefault(_group(phase), [0.0, 0])
        group[0] += end - begin
        group[1] += n
    row: dict[str, Any] = {
        "detail": detail.value, "nodes": report.nodes, "relationships": report.relationships, "s": seconds,
        "elements_per_s": (report.nodes + report.relationships) / seconds, "used_memory_mb": _used_mb(info),
        "phases": {g: {"rows": n, "s": t, "rows_per_s": n / t if t else 0.0} for g, (t, n) in spent.items()},
    }
    print(f"  load {detail.value:<9} {report.nodes:>9,} nodes {report.relationships:>10,} rels in {seconds:6.1f} s "
          f"= {row['elements_per_s']:>8,.0f} elements/s; server memory {row['used_memory_mb']:,.0f} MB", flush=True)
    for g, p in row["phases"].items():
        print(f"      {g:<14} {p['rows']:>10,} rows in {p['s']:6.1f} s = {p['rows_per_s']:>8,.0f} /s", flush=True)
    return row


def bench_ceiling(info: ServerInfo, a: Analysis) -> dict[str, Any]:
    """The same op columns and DAG edges through the database's own bulk UNWIND ... CREATE."""
    tables = dict(graph_tables(a, "ceiling").phases)
    ops = tables["load_ops"]
    edges = [t for name, t in tables.items() if name.startswith("load_edges_")]
    with open_store(Settings(home=HOME, workers=2, graph_name="bench_ceiling")) as store:
        store.write("bulk_index")
        started = time.perf_counter()
        for start in range(0, len(ops), BATCH):
            columns = ops.rows(start, start + BATCH)
            columns.pop("step_key")
            store.write("bulk_create_ops", columns)
        node_s = time.perf_counter() - started
        started = time.perf_counter()
        n_edges = 0
        for table in edges:
            for start in range(0, len(table), BATCH):
                n_edges += int(store.write("bulk_create_edges", table.rows(start, start + BATCH)).rows[0]["created"])
        edge_s = time.perf_counter() - started
    _drop(info, "bench_ceiling")
    row = {"nodes": len(ops), "node_s": node_s, "nodes_per_s": len(ops) / node_s, "relationships": n_edges,
           "rel_s": edge_s, "rels_per_s": n_edges / edge_s}
    print(f"  ceiling   {len(ops):>10,} nodes {n_edges:>10,} rels: {row['nodes_per_s']:>9,.0f} nodes/s "
          f"{row['rels_per_s']:>9,.0f} rels/s", flush=True)
    return row


def _timed(store: GraphStore, query: Any, params: dict[str, Any], runs: int) -> tuple[list[float], int]:
    rows = store.read(query, params)  # warm-up (and the row count)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        store.read(query, params)
        times.append((time.perf_counter() - started) * 1000)
    return times, len(rows)


def bench_queries(a: Analysis, tid: str, runs: int) -> list[dict[str, Any]]:
    slowest = max(a.steps, key=lambda r: r.wall_ns)
    steps = sorted({r.step for r in a.steps})
    median_step = steps[len(steps) // 2]
    embedder = Embedder.load()
    question = embedder.embed(["why does rank 0 wait inside the all-reduce of this step?"])[0].astype(float).tolist()
    out = []
    with open_store(Settings(home=HOME, workers=2, graph_name="bench_full")) as store:
        ensure_playbook(store, read_playbook(), embedder)
        path = {"trace": tid, "step": slowest.step, "rank": slowest.rank}
        subgraph = store.read(subgraph_query(1), path)
        cases: list[tuple[str, Any, dict[str, Any]]] = [
            ("floor: trace_state", "trace_state", {"trace": tid}),
            ("trace_steps", "trace_steps", {"trace": tid}),
            ("slow_steps", "slow_steps", {"trace": tid}),
            ("critical_path", "critical_path", path),
            ("critical_subgraph 1 hop", subgraph_query(1), path),
            ("critical_subgraph 2 hops", subgraph_query(2), path),
            ("subgraph_edges (1 hop)", "subgraph_edges", {"trace": tid, "keys": [r["key"] for r in subgraph]}),
            ("top_critical_ops k=10", "top_critical_ops", {**path, "k": 10}),
            ("compare_steps k=20", "compare_steps", {"trace": tid, "rank": slowest.rank, "step_a": median_step,
                                                     "step_b": slowest.step, "k": 20}),
            ("collective_stragglers", "collective_stragglers", {"trace": tid, "step": slowest.step}),
            ("step_findings", "step_findings", {"trace": tid, "step": slowest.step}),
            ("ops_by_name 'nccl' (trace)", "ops_by_name", {"trace": tid, "pattern": "nccl", "limit": 20}),
            ("step_ops_by_name 'nccl'", "step_ops_by_name", {"trace": tid, "step": slowest.step, "pattern": "nccl",
                                                             "limit": 20}),
            ("playbook_search k=5", "playbook_search", {"vector": question, "k": 5}),
        ]
        gc.collect()
        gc.freeze()  # this process holds a 1M-op analysis: keep collector pauses over it out of the timings
        for label, query, params in cases:
            times, n = _timed(store, query, params, runs)
            row = {"query": label, "rows": n, "p50_ms": statistics.median(times),
                   "p95_ms": float(np.percentile(times, 95))}
            out.append(row)
    floor = out[0]["p50_ms"]
    for row in out:
        row["p50_over_floor"] = row["p50_ms"] / floor
        print(f"  {row['query']:<28} {row['rows']:>7,} rows  p50 {row['p50_ms']:8.1f} ms  p95 {row['p95_ms']:8.1f} ms"
              f"  p50/floor {row['p50_over_floor']:7.1f}", flush=True)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per query")
    parser.add_argument("--skip-full", action="store_true", help="load summary and critical only (no queries)")
    args = parser.parse_args(argv)
    large = make_large_trace(DEFAULT_SRC, DEFAULT_OUT)
    started = time.perf_counter()
    trace = read_trace(large, workers=2)
    a = analyze(trace)
    tid = trace_id(trace)
    print(f"{large.name}: {len(a.graph):,} ops, {len(a.graph.edge_src):,} DAG edges, {len(a.steps)} (step, rank) "
          f"critical paths; read + analysis {time.perf_counter() - started:.1f} s", flush=True)
    shutil.rmtree(HOME, ignore_errors=True)
    info = start_server(HOME)
    result: dict[str, Any] = {"trace": large.name, "ops": len(a.graph), "dag_edges": len(a.graph.edge_src),
                              "batch": BATCH}
    try:
        result["ceiling"] = bench_ceiling(info, a)
        details = [Detail.SUMMARY, Detail.CRITICAL] + ([] if args.skip_full else [Detail.FULL])
        result["loads"] = []
        ceiling = result["ceiling"]
        for detail in details:
            row = bench_load(info, a, tid, detail)
            phases = row["phases"]
            row["ops_vs_ceiling"] = phases.get("ops", {}).get("rows_per_s", 0.0) / ceiling["nodes_per_s"]
            row["edges_vs_ceiling"] = phases.get("dag_edges", {}).get("rows_per_s", 0.0) / ceiling["rels_per_s"]
            result["loads"].append(row)
            if detail is not Detail.FULL:
                _drop(info, f"bench_{detail.value}")
        if not args.skip_full:
            with redis.Redis(port=info.port, password=info.password) as r:
                r.save()  # the snapshot after the load, so no background save runs under the timed queries
            result["queries"] = bench_queries(a, tid, args.runs)
    finally:
        stop_server(HOME)
    print("\ndetail     elements/s  ops/s (+IN_STEP)  DAG edges/s  ops/ceiling  edges/ceiling")
    for row in result["loads"]:
        p = row["phases"]
        print(f"{row['detail']:<9}{row['elements_per_s']:>12,.0f}{p.get('ops', {}).get('rows_per_s', 0):>18,.0f}"
              f"{p.get('dag_edges', {}).get('rows_per_s', 0):>13,.0f}{row['ops_vs_ceiling']:>13.2f}"
              f"{row['edges_vs_ceiling']:>15.2f}")
    (WORK / "bench_graphdb.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
