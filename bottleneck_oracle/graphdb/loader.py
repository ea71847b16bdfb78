"""Load a trace's analysis into a graph store: batched, idempotent, visible only once complete.

A load marks its Trace node ``loading``, removes anything an earlier load left, then sends the
tables of ``graph_tables`` in batches (``UNWIND`` over columns), part by part: the head (ranks,
steps, collectives), one part per rank (its ops and the edges inside it), the tail (edges between
ranks, critical-path links, findings). The rank parts may load in parallel, each on its own
connection (Ray tasks, ``executor``). Each batch is one transaction that also advances its part's
cursor (a LoadPart node), and runs only if that cursor is where the loader left it: after a crash
(of the loader, a task or the server) the next load with the same plan resumes each part after its
last committed batch, and a batch sent twice is applied once. A part whose connection drops waits
and resumes the same way (``RETRY_WAIT_S``). The status becomes ``complete`` last, so queries never
see a half-loaded trace. Loading a complete trace again is a no-op; loading it at another detail
level replaces it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import GraphStoreError, StoreUnavailableError
from bottleneck_oracle.executor import Executor
from bottleneck_oracle.graphdb.parts import PART_OPS, OpSource
from bottleneck_oracle.graphdb.queries import Query, delete_query, edge_query
from bottleneck_oracle.graphdb.schema import SCHEMA_VERSION, TRACE_SCOPED, Rel
from bottleneck_oracle.graphdb.store import GraphStore, open_store
from bottleneck_oracle.graphdb.tables import GraphTables, batched, graph_tables, rank_phases
from bottleneck_oracle.graphdb.types import Detail, TraceSummary
from bottleneck_oracle.traces import Trace

__all__ = ["LoadReport", "load_analysis", "delete_trace", "list_traces", "trace_id", "trace_name", "DEFAULT_BATCH"]

DEFAULT_BATCH = 10_000
_DELETE_BATCH = 50_000
RETRY_WAIT_S = (0.5, 1.0, 2.0)  # waits before a part whose connection dropped resumes: then it fails
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
        retries (int): times a part resumed after the database dropped the connection.
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
    retries: int = 0


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


@dataclass(slots=True)
class PartLoaded:
    """What loading one part did, over all its tries: batches sent, what they created, and how often the
    part resumed after the database dropped the connection (``StoreUnavailableError``)."""

    sent: int = 0
    nodes_created: int = 0
    relationships_created: int = 0
    retries: int = 0


@dataclass(frozen=True, slots=True)
class RankPart:
    """A part of the ranks as a task loads it where it runs: its own connection from ``settings``."""

    settings: Settings
    trace_id: str
    key: str
    index: int  # the part's number among the ranks' parts (``OpSource.parts``)
    batch_size: int


def _send(store: GraphStore, trace_id: str, key: str, batches: Iterable[tuple[str, dict[str, list[Any]]]],
          cursor: int, done: Callable[[], None] | None, loaded: PartLoaded) -> None:
    for seq, (phase, columns) in enumerate(batches):
        if seq <= cursor:
            continue
        result = store.write(_query(phase), {"trace": trace_id, "part": key, "cursor": seq, **columns})
        rows = len(next(iter(columns.values())))
        if not result.rows or int(result.rows[0]["created"]) != rows:
            got = int(result.rows[0]["created"]) if result.rows else 0
            raise GraphStoreError(f"trace {trace_id}: batch {seq} of part {key.rpartition(':')[2]} ({phase}) applied "
                                  f"{got} of {rows} rows: another load of this trace is running, or its ops are "
                                  "missing; run the load again")
        loaded.nodes_created += result.nodes_created
        loaded.relationships_created += result.relationships_created
        loaded.sent += 1
        if done is not None:
            done()


def _part_cursor(store: GraphStore, key: str) -> int:
    return next((int(r["cursor"]) for r in store.read("load_part_cursor", {"part": key})), -1)


def _load_part(store: GraphStore, trace_id: str, key: str, batches: Callable[[], Iterable[tuple[str, dict[str, list[Any]]]]],
               cursor: int | None, done: Callable[[], None] | None = None) -> PartLoaded:
    """Sends a part's batches after ``cursor``; when the database drops the connection, waits and resumes
    after the part's cursor as the database holds it (a server restarted from its last snapshot may hold
    fewer batches than were sent), up to ``RETRY_WAIT_S`` times."""
    loaded = PartLoaded()
    while True:
        try:
            cursor = _part_cursor(store, key) if cursor is None else cursor
            _send(store, trace_id, key, batches(), cursor, done, loaded)
            return loaded
        except StoreUnavailableError:
            if loaded.retries == len(RETRY_WAIT_S):
                raise
            time.sleep(RETRY_WAIT_S[loaded.retries])
            loaded.retries += 1
            cursor = None  # read anew from the database before sending again


def _load_rank_part(source: OpSource, part: RankPart) -> PartLoaded:
    """A Ray task: one part of the ranks, built from the shared ``source`` and sent on a connection of its own. It
    reads where its part stands first: a task run again after its worker died resumes after what it committed."""
    with open_store(part.settings) as store:
        return _load_part(store, part.trace_id, part.key,
                          lambda: batched(rank_phases(source, part.index), part.batch_size), None)


def load_analysis(
    store: GraphStore, a: Analysis, *, trace_id: str, name: str, detail: Detail = Detail.FULL, hops: int = 1,
    batch_size: int = DEFAULT_BATCH, progress: Progress | None = None, executor: Executor | None = None,
    settings: Settings | None = None, part_ops: int = PART_OPS,
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
        progress (Callable[[int, int], None] | None): called as batches commit with (done, total).
        executor (Executor | None): where the rank parts load, each task on a connection it opens from
            ``settings`` (which must name a database the tasks reach); None: one after the other here.
        settings (Settings | None): with ``executor``.
        part_ops (int): ops a part of the ranks gathers (``parts.PART_OPS``).

    Raises:
        GraphStoreError: the store went down (run the load again to finish it), or another load of
            the same trace moved a part's cursor.
    """
    started = time.monotonic()
    tables = graph_tables(a, trace_id, detail, hops, part_ops)
    plan = tables.plan(batch_size)
    keys = [f"{trace_id}:{plan}:{part}" for part in tables.parts]
    state = next(iter(store.read("trace_state", {"trace": trace_id})), None)
    status = state["status"] if state is not None and state["plan"] == plan else None
    if status == "complete":
        return LoadReport(trace_id, detail, "unchanged", -1, 0, tables.nodes, tables.relationships, 0, 0,
                          time.monotonic() - started)
    cursors = {r["key"]: int(r["cursor"]) for r in store.read("load_parts", {"trace": trace_id})}
    if status != "loading":  # new, another plan, or a delete that stopped half-way: start over
        _begin(store, a, trace_id, name, tables, plan)
    if status != "loading" or keys[0] not in cursors:  # no head part: the delete before it may not have ended
        _delete_content(store, trace_id)  # what an earlier load left, LoadParts first, or nothing
        cursors = {}
    store.write("load_parts_begin", {"trace": trace_id, "keys": keys})
    start = [cursors.get(k, -1) for k in keys]
    counts = tables.batch_counts(batch_size)
    committed = sum(c + 1 for c in start)
    total, done = sum(counts), committed

    def one_done() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    def here(i: int) -> PartLoaded:
        return _load_part(store, trace_id, keys[i], lambda: tables.batches(batch_size, i), start[i], one_done)

    loaded = [here(0)]
    ranks = range(1, len(keys) - 1)
    if executor is not None and settings is not None and len(ranks):
        jobs = [RankPart(settings, trace_id, keys[i], i - 1, batch_size) for i in ranks]

        def rank_done(j: int) -> None:
            for _ in range(counts[j + 1] - start[j + 1] - 1):
                one_done()

        loaded += executor.map(_load_rank_part, jobs, shared=tables.source, done=rank_done)
    else:
        loaded += [here(i) for i in ranks]
    loaded.append(here(len(keys) - 1))
    store.write("trace_finish", {
        "trace": trace_id, "steps": len(a.steps), "ops": int(tables.loaded.sum()),
        "relationships": tables.relationships, "loaded_at": time.time(),
    })
    return LoadReport(trace_id, detail, "resumed" if committed else "loaded", committed - 1,
                      sum(p.sent for p in loaded), tables.nodes, tables.relationships,
                      sum(p.nodes_created for p in loaded), sum(p.relationships_created for p in loaded),
                      time.monotonic() - started, sum(p.retries for p in loaded))


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
