"""Load a trace's analysis into a graph store: batched, idempotent, visible only once complete.

A load marks its Trace node ``loading``, removes anything an earlier load left, then sends the
tables of ``graph_tables`` in batches (``UNWIND`` over columns). Each batch is one transaction
that also advances the trace's ``cursor``, and runs only if the cursor is where the loader left
it: after a crash (of the loader or the server) the next load with the same plan resumes after
the last committed batch, and a batch sent twice is applied once. The status becomes
``complete`` last, so queries never see a half-loaded trace. Loading a complete trace again is a
no-op; loading it at another detail level replaces it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bottleneck_oracle.dag.analysis import Analysis
from bottleneck_oracle.errors import GraphStoreError
from bottleneck_oracle.graphdb.queries import Query, delete_query, edge_query
from bottleneck_oracle.graphdb.schema import SCHEMA_VERSION, TRACE_SCOPED, Rel
from bottleneck_oracle.graphdb.store import GraphStore
from bottleneck_oracle.graphdb.tables import GraphTables, graph_tables
from bottleneck_oracle.graphdb.types import Detail, TraceSummary
from bottleneck_oracle.traces import Trace

__all__ = ["LoadReport", "load_analysis", "delete_trace", "list_traces", "trace_id", "trace_name", "DEFAULT_BATCH"]

DEFAULT_BATCH = 10_000
_DELETE_BATCH = 50_000
Progress = Callable[[int, int], None]  # (batches done, batches in all)


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What ``load_analysis`` did.

    Args:
        trace_id (str): the trace.
        detail (Detail): what is loaded.
        outcome (str): ``loaded``, ``resumed`` (an interrupted load finished) or ``unchanged``
            (the same trace at the same detail was loaded already: nothing sent).
        resumed_after (int): the last batch an interrupted load had committed (-1: none).
        batches (int): batches this call sent.
        nodes (int): nodes the trace has in the store.
        relationships (int): relationships the trace has in the store.
        nodes_created (int): nodes this call created.
        relationships_created (int): relationships this call created.
        seconds (float): wall time of the load.
    """

    trace_id: str
    detail: Detail
    outcome: str
    resumed_after: int
    batches: int
    nodes: int
    relationships: int
    nodes_created: int
    relationships_created: int
    seconds: float


def trace_id(trace: Trace) -> str:
    """The id of a trace: a hash of its files' contents (and of its execution-trace dependencies)."""
    digest = hashlib.blake2b(digest_size=8)
    for info in trace.ranks:
        with open(info.path, "rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
        digest.update(b"\0rank%d\0" % info.rank)
    digest.update(trace.data_deps.tobytes())
    return digest.hexdigest()


def _query(name: str) -> Query | str:
    """Names of ``graph_tables`` phases are library queries, except the built ``load_edges_<rel>``."""
    if name.startswith("load_edges_"):
        return edge_query(Rel(name.removeprefix("load_edges_").upper()))
    return name


def _delete_content(store: GraphStore, tid: str) -> int:
    deleted = 0
    for label in TRACE_SCOPED:
        query = delete_query(label)
        while n := int(store.write(query, {"trace": tid, "limit": _DELETE_BATCH}).rows[0]["deleted"]):
            deleted += n
    return deleted


def _begin(store: GraphStore, a: Analysis, tid: str, name: str, tables: GraphTables, plan: str) -> None:
    infos = a.graph.trace.ranks
    store.write("trace_begin", {
        "trace": tid, "name": name, "detail": tables.detail.value, "hops": tables.hops, "plan": plan,
        "schema_version": SCHEMA_VERSION, "files": [str(i.path) for i in infos], "ranks": [i.rank for i in infos],
        "world_size": max((i.world_size or 0 for i in infos), default=0) or None,
        "events": int(sum(i.events for i in infos)), "graph_nodes": len(a.graph), "graph_edges": len(a.graph.edge_src),
        "steps_annotated": bool((a.graph.steps.step >= 0).any()), "started_at": time.time(),
    })


def load_analysis(
    store: GraphStore, a: Analysis, *, trace_id: str, name: str, detail: Detail = Detail.FULL, hops: int = 1,
    batch_size: int = DEFAULT_BATCH, progress: Progress | None = None,
) -> LoadReport:
    """Loads the analysis ``a`` of trace ``trace_id`` into ``store`` (see the module docstring).

    Args:
        store (GraphStore): where to load (its schema applied).
        a (Analysis): the analysis.
        trace_id (str): the trace's id (``trace_id(trace)``).
        name (str): a name to list it by (its folder).
        detail (Detail): full, critical (paths plus ``hops`` neighbourhood) or summary.
        hops (int): the neighbourhood radius of ``critical``.
        batch_size (int): rows per batch (one transaction each).
        progress (Callable[[int, int], None] | None): called after each batch with (done, total).

    Raises:
        GraphStoreError: the store went down (run the load again to finish it), or another load of
            the same trace moved its cursor.
    """
    started = time.monotonic()
    tables = graph_tables(a, trace_id, detail, hops)
    plan = tables.plan(batch_size)
    batches = list(tables.batches(batch_size))
    state = next(iter(store.read("trace_state", {"trace": trace_id})), None)
    status = state["status"] if state is not None and state["plan"] == plan else None
    if status == "complete":
        return LoadReport(trace_id, detail, "unchanged", -1, 0, tables.nodes, tables.relationships, 0, 0,
                          time.monotonic() - started)
    cursor = int(state["cursor"]) if status == "loading" and state is not None else -1
    if status != "loading":  # new, another plan, or a delete that stopped half-way: start over
        _begin(store, a, trace_id, name, tables, plan)
    if cursor < 0:
        _delete_content(store, trace_id)  # what an earlier load of another plan left, or nothing
    nodes_created = relationships_created = sent = 0
    for seq, (phase, columns) in enumerate(batches):
        if seq <= cursor:
            continue
        result = store.write(_query(phase), {"trace": trace_id, "cursor": seq, **columns})
        rows = len(next(iter(columns.values())))
        if not result.rows or int(result.rows[0]["created"]) != rows:
            got = int(result.rows[0]["created"]) if result.rows else 0
            raise GraphStoreError(f"trace {trace_id}: batch {seq} ({phase}) applied {got} of {rows} rows: another "
                                  "load of this trace is running, or its ops are missing; run the load again")
        nodes_created += result.nodes_created
        relationships_created += result.relationships_created
        sent += 1
        if progress is not None:
            progress(seq + 1, len(batches))
    store.write("trace_finish", {
        "trace": trace_id, "steps": len(a.steps), "ops": int(tables.loaded.sum()),
        "relationships": tables.relationships, "loaded_at": time.time(),
    })
    return LoadReport(trace_id, detail, "resumed" if cursor >= 0 else "loaded", cursor, sent, tables.nodes,
                      tables.relationships, nodes_created, relationships_created, time.monotonic() - started)


def delete_trace(store: GraphStore, trace_id: str) -> bool:
    """Removes a trace and everything loaded for it; False when it was not there."""
    if not store.read("trace_state", {"trace": trace_id}):
        return False
    store.write("trace_hide", {"trace": trace_id})
    _delete_content(store, trace_id)
    store.write("trace_remove", {"trace": trace_id})
    return True


def list_traces(store: GraphStore) -> list[TraceSummary]:
    """Every trace in the store, the newest load first, complete or not."""
    return [
        TraceSummary(
            trace_id=r["trace_id"], name=r["name"] or "", status=r["status"] or "loading",
            detail=Detail(r["detail"] or Detail.FULL), ranks=int(r["ranks"] or 0), steps=int(r["steps"] or 0),
            ops=int(r["ops"] or 0), relationships=int(r["relationships"] or 0), loaded_at=r["loaded_at"],
        )
        for r in store.read("trace_list")
    ]


def trace_name(paths: list[Path]) -> str:
    """A short name for a trace read from ``paths``: the folder, or the file, of the first one."""
    return Path(paths[0]).resolve().name if paths else "trace"
