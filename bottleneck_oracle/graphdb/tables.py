"""What a trace puts in the graph: its analysis as column tables, one per node label and relationship,
in load parts (a head, one part per rank, a tail: ``GraphTables``).

``graph_tables`` selects by detail level: ``full`` every op and DAG edge; ``critical`` the ops on
any (step, rank)'s critical path, every op within ``hops`` DAG edges of them (either direction)
and every collective member; ``summary`` only ranks, steps (with their top ops) and findings.
Columns are Python lists ready to send as query parameters; times are rounded to the ns.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.errors import GraphError
from bottleneck_oracle.findings.finding import untraced_wait_ns
from bottleneck_oracle.findings.gpu_bound import gpu_bound_steps
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.graph.types import CATEGORIES, EdgeType
from bottleneck_oracle.graphdb.parts import PART_OPS, OpSource, edge_phase, file_shift_ns, to_us
from bottleneck_oracle.graphdb.schema import SCHEMA_VERSION
from bottleneck_oracle.graphdb.types import Detail

__all__ = ["Table", "GraphTables", "graph_tables", "critical_nodes", "expand_hops", "step_key", "GPU_FIELDS",
           "TOP_OPS"]

TOP_OPS = 10  # op names kept per step in the summary columns
# the GPU timeline's fields a Step node keeps, as ``gpu_<field>`` (graph/gpu_timeline.py; ``total`` is the wall)
GPU_FIELDS = ("busy_ms", "idle_ms", "computation_ms", "comm_ms", "exposed_comm_ms", "memcpy_ms", "exposed_memcpy_ms")
# (nodes, relationships) each row of a phase creates
_COUNTS = {
    "load_ranks": (1, 1), "load_steps": (1, 1), "load_collectives": (1, 0), "load_ops": (1, 1),
    "load_loose_ops": (1, 0), "load_member_of": (0, 1), "load_edges": (0, 1), "load_critical_next": (0, 1),
    "load_findings": (1, 0), "load_explains": (0, 1),
}


def _counts(phase: str) -> tuple[int, int]:
    return _COUNTS["load_edges" if phase.startswith("load_edges_") else phase]


@dataclass(frozen=True, slots=True)
class Table:
    """Equal-length columns (name → list), sent to a load query a slice at a time."""

    columns: dict[str, list[Any]]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def rows(self, start: int, stop: int) -> dict[str, list[Any]]:
        """Columns of rows ``start`` to ``stop``."""
        return {name: values[start:stop] for name, values in self.columns.items()}


def rank_phases(source: OpSource, index: int) -> list[tuple[str, Table]]:
    """(query name, table) of the ranks' part number ``index``."""
    return [(name, Table(cols)) for name, cols in source.phases(index)]


def batched(phases: list[tuple[str, Table]], size: int) -> Iterator[tuple[str, dict[str, list[Any]]]]:
    """(query name, columns) of every batch of at most ``size`` rows of ``phases``, in order."""
    for name, table in phases:
        for start in range(0, len(table), size):
            yield name, table.rows(start, start + size)


@dataclass(frozen=True, slots=True)
class GraphTables:
    """Every table of one trace, in load order, in parts: ``head`` (ranks, steps, collectives), one part
    per few ranks (``parts.py``, built when it loads), then ``tail`` (edges between ranks, critical-path
    links, findings).

    Args:
        detail (Detail): what was selected.
        hops (int): neighbourhood radius of ``critical``.
        loaded (np.ndarray): bool[N], the ExecGraph nodes that become Op nodes.
        head, tail (tuple[tuple[str, Table], ...]): (query name, table) of the first and last part;
            ``load_edges_<rel>`` names are built queries.
        source (OpSource | None): what the rank parts are built from (None: no op is loaded).
        rank_sizes (tuple[dict[str, int], ...]): rows per phase of each part of the ranks.
    """

    detail: Detail
    hops: int
    loaded: np.ndarray
    head: tuple[tuple[str, Table], ...] = field(default=())
    tail: tuple[tuple[str, Table], ...] = field(default=())
    source: OpSource | None = None
    rank_sizes: tuple[dict[str, int], ...] = field(default=())

    @property
    def parts(self) -> list[str]:
        """The parts' names in load order: head, the ranks' (``rank<r>`` or ``ranks<first>-<last>``), tail."""
        return ["head", *([] if self.source is None else self.source.parts), "tail"]

    def part_phases(self, part: int) -> list[tuple[str, Table]]:
        """(query name, table) of part number ``part`` (rank parts are built now)."""
        if part == 0:
            return list(self.head)
        if part == len(self.parts) - 1:
            return list(self.tail)
        assert self.source is not None
        return rank_phases(self.source, part - 1)

    def sizes(self) -> list[list[tuple[str, int]]]:
        """Rows per phase of each part, in load order (no rank part is built)."""
        return [[(n, len(t)) for n, t in self.head], *(list(s.items()) for s in self.rank_sizes),
                [(n, len(t)) for n, t in self.tail]]

    @property
    def phases(self) -> tuple[tuple[str, Table], ...]:
        """Every table whole, each phase's rows joined part after part: for small traces and tests."""
        merged: dict[str, dict[str, list[Any]]] = {}
        for part in range(len(self.parts)):
            for name, table in self.part_phases(part):
                into = merged.setdefault(name, {c: [] for c in table.columns})
                for c, values in table.columns.items():
                    into[c] += values
        return tuple((name, Table(cols)) for name, cols in merged.items())

    @property
    def nodes(self) -> int:
        """Nodes the trace adds, the Trace node included."""
        return 1 + sum(n * _counts(name)[0] for part in self.sizes() for name, n in part)

    @property
    def relationships(self) -> int:
        """Relationships the trace adds."""
        return sum(n * _counts(name)[1] for part in self.sizes() for name, n in part)

    def batches(self, size: int, part: int) -> Iterator[tuple[str, dict[str, list[Any]]]]:
        """(query name, columns) of every batch of at most ``size`` rows of part number ``part``, in load order."""
        return batched(self.part_phases(part), size)

    def batch_counts(self, size: int) -> list[int]:
        """Batches of each part."""
        return [sum(-(-n // size) for _, n in part) for part in self.sizes()]

    def plan(self, size: int) -> str:
        """A signature of the batches: a load resumes only a crashed load with the same plan."""
        parts = [f"v{SCHEMA_VERSION}", self.detail.value, str(self.hops), str(size)]
        for name, sizes in zip(self.parts, self.sizes()):
            parts += [name, *(f"{phase}={n}" for phase, n in sizes)]
        return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def step_key(trace_id: str, step: int, rank: int) -> str:
    """The key of a Step node."""
    return f"{trace_id}:{step}:{rank}"


def _file_ts_us(a: Analysis, rank: np.ndarray, t_ns: np.ndarray) -> list[float]:
    """Times as the ``ts`` (µs) each rank's file uses."""
    return to_us(np.asarray(t_ns, dtype=np.int64) + file_shift_ns(a)[np.asarray(rank, dtype=np.int64)])


def critical_nodes(reports: list[StepReport] | tuple[StepReport, ...]) -> np.ndarray:
    """Sorted node indexes on the critical path of any of ``reports``."""
    nodes = [r.path_node[r.path_node >= 0] for r in reports]
    return np.unique(np.concatenate(nodes)) if nodes else np.zeros(0, dtype=np.int64)


def expand_hops(a: Analysis, seed: np.ndarray, hops: int) -> np.ndarray:
    """bool[N]: ``seed`` nodes and every node within ``hops`` DAG edges of them, in either direction."""
    g = a.graph
    reach = np.zeros(len(g), dtype=bool)
    reach[seed] = True
    for _ in range(hops):
        nxt = reach.copy()
        nxt[g.edge_dst[reach[g.edge_src]]] = True
        nxt[g.edge_src[reach[g.edge_dst]]] = True
        reach = nxt
    return reach


def _ranks(a: Analysis) -> Table:
    infos = a.graph.trace.ranks
    return Table({
        "rank": [i.rank for i in infos], "file": [i.path.name for i in infos], "events": [i.events for i in infos],
        "backend": [i.backend or "" for i in infos], "devices": [list(i.devices) for i in infos],
    })


def _top_ops(a: Analysis, r: StepReport) -> tuple[list[str], list[float]]:
    totals: dict[str, int] = defaultdict(int)
    for node, dur in zip(r.path_node.tolist(), r.path_dur_ns.tolist()):
        if node >= 0:
            totals[a.graph.node_name(node)] += dur
    top = sorted(totals, key=lambda n: (-totals[n], n))[:TOP_OPS]
    return top, [round(totals[n] / 1000, 3) for n in top]


def _gpu_columns(a: Analysis) -> dict[str, list[Any]]:
    """Per step report: its GPU timeline (``gpu_<field>``, ``gpu_busy_pct``) and GPU-bound verdict
    (``gpu_bound``, ``gpu_evidence``, ``gpu_op_classes`` with ``gpu_op_classes_ms``; complete steps
    whose GPU worked most of the window, exposed communication left out: ``GpuTimeline.work_ns``);
    None throughout on a rank that recorded no GPU work."""
    g, gpu = a.graph, a.gpu
    rows = g.steps.row_of()
    worked = set(a.gpu_trace.rank.tolist())
    names = [f"gpu_{f}" for f in GPU_FIELDS] + ["gpu_busy_pct", "gpu_bound", "gpu_evidence"]
    cols: dict[str, list[Any]] = {n: [] for n in names + ["gpu_op_classes", "gpu_op_classes_ms"]}
    for r in a.steps:
        i = rows.get((r.step, r.rank))
        if i is None or r.rank not in worked:
            for n in names:
                cols[n].append(None)
            cols["gpu_op_classes"].append([])
            cols["gpu_op_classes_ms"].append([])
            continue
        record = gpu.record(i)
        for f in GPU_FIELDS:
            cols[f"gpu_{f}"].append(record[f])
        share = gpu.busy_share(i)
        cols["gpu_busy_pct"].append(round(100 * share, 1))
        complete = (r.step, r.rank) not in a.partial_steps
        bound = gpu_bound_steps(g, gpu, [(r.step, r.rank)]) if complete else []
        cols["gpu_bound"].append(bool(bound))
        cols["gpu_evidence"].append(bound[0].evidence if bound else None)
        cols["gpu_op_classes"].append([c for c, _ in bound[0].op_classes] if bound else [])
        cols["gpu_op_classes_ms"].append([t for _, t in bound[0].op_classes] if bound else [])
    return cols


def _steps(a: Analysis, trace_id: str) -> Table:
    slow = {(s.step, s.rank): s for s in a.slow_steps}
    reports = a.steps
    if len({(r.step, r.rank) for r in reports}) != len(reports):
        raise GraphError(f"trace {trace_id}: two step reports share a (step, rank)")
    cols: dict[str, list[Any]] = defaultdict(list)
    for r in reports:
        s = slow.get((r.step, r.rank))
        top, top_us = _top_ops(a, r)
        cols["step"].append(r.step)
        cols["rank"].append(r.rank)
        cols["wall_ms"].append(round(r.wall_ns / 1e6, 3))
        cols["critical_path_ms"].append(round(int(r.path_dur_ns.sum()) / 1e6, 3))
        cols["slow"].append(s is not None)
        cols["partial"].append((r.step, r.rank) in a.partial_steps)
        cols["median_ms"].append(round(s.median_ns / 1e6, 3) if s else None)
        cols["excess_ms"].append(round(s.excess_ns / 1e6, 3) if s else None)
        for c in CATEGORIES:
            cols[f"{c.value}_ms"].append(round(r.breakdown_ns[c] / 1e6, 3))
        cols["untraced_wait_ms"].append(round(untraced_wait_ns(a.graph, r) / 1e6, 3))
        cols["path_segments"].append(len(r.path_node))
        cols["top_ops"].append(top)
        cols["top_ops_us"].append(top_us)
    start = np.array([r.start_ns for r in reports], dtype=np.int64)
    rank = np.array([r.rank for r in reports], dtype=np.int64)
    cols["start_us"] = to_us(start)
    cols["ts_us"] = _file_ts_us(a, rank, start) if len(reports) else []
    return Table(dict(cols) | _gpu_columns(a))


def _collectives(a: Analysis) -> Table:
    """One row per instance; its step is the step of the member that arrived last (ties: lowest rank)."""
    g = a.graph
    table = g.collectives
    members = np.flatnonzero(g.collective >= 0)
    order = members[np.lexsort((g.rank[members], g.collective[members]))]
    step = g.step
    last_step = np.full(len(table), -1, dtype=np.int64)
    for group in np.split(order, np.flatnonzero(np.diff(g.collective[order])) + 1):
        if len(group):
            last_step[g.collective[group[0]]] = step[group[np.argmax(g.start_ns[group])]]
    return Table({
        "instance": list(range(len(table))), "kind": list(table.kind), "step": last_step.tolist(),
        "matched_by": list(table.key), "reliable": table.reliable.astype(bool).tolist(),
    })


def _critical_next(a: Analysis, trace_id: str) -> Table:
    """One row per segment of every (step, rank)'s critical path: from the previous owner to this one."""
    cols: dict[str, list[Any]] = defaultdict(list)
    for r in a.steps:
        node = r.path_node.astype(np.int64)
        k = len(node)
        owner = [int(n) if n >= 0 else None for n in node.tolist()]
        cols["path"] += [step_key(trace_id, r.step, r.rank)] * k
        cols["pos"] += list(range(k))
        cols["src"] += [None, *owner[:-1]] if k else []
        cols["dst"] += owner
        cols["gap"] += (node < 0).tolist()
        cols["category"] += [CATEGORIES[c].value for c in r.path_category.tolist()]
        cols["rank"] += r.path_rank.tolist()
        cols["contrib_us"] += to_us(r.path_dur_ns)
        gap_ts = _file_ts_us(a, r.path_rank, r.path_start_ns) if k else []
        cols["ts_us"] += [t if n is None else None for t, n in zip(gap_ts, owner)]
    return Table(dict(cols))


def _findings(a: Analysis, trace_id: str) -> tuple[Table, Table]:
    findings = Table({
        "idx": list(range(len(a.findings))), "category": [f.category.value for f in a.findings],
        "step": [f.step for f in a.findings], "ranks": [list(f.ranks) for f in a.findings],
        "ops": [list(f.ops) for f in a.findings], "impact_ms": [float(f.impact_ms) for f in a.findings],
        "evidence": [f.evidence for f in a.findings], "severity": [f.severity for f in a.findings],
        # the cause of its step (findings/cause.py), with the ranks that waited for it and how long
        "cause": [f.cause for f in a.findings], "waiting": [list(f.waiting) for f in a.findings],
        "waited_ms": [[float(w) for w in f.waited_ms] for f in a.findings],
    })
    finding, key = [], []
    for i, f in enumerate(a.findings):
        for r in a.steps:
            if r.rank in f.ranks and (f.step is None or f.step == r.step):
                finding.append(i)
                key.append(step_key(trace_id, r.step, r.rank))
    return findings, Table({"finding": finding, "step_key": key})


def _step_keys(a: Analysis, trace_id: str) -> np.ndarray:
    """The Step key of each step row the analysis reports (else None), then None: ``OpSource.step_keys``."""
    steps = a.graph.steps
    reported = {(r.step, r.rank) for r in a.steps}
    return np.array([step_key(trace_id, s, r) if (s, r) in reported else None
                     for s, r in zip(steps.step.tolist(), steps.rank.tolist())] + [None], dtype=object)


def _cross_rank_edges(a: Analysis, cross: np.ndarray) -> list[tuple[str, Table]]:
    g = a.graph
    out = []
    for etype in EdgeType:
        mask = cross & (g.edge_type == etype)
        if mask.any():
            out.append((edge_phase(etype), Table({"src": g.edge_src[mask].tolist(), "dst": g.edge_dst[mask].tolist()})))
    return out


def graph_tables(a: Analysis, trace_id: str, detail: Detail = Detail.FULL, hops: int = 1,
                 part_ops: int = PART_OPS) -> GraphTables:
    """The tables of ``a`` at ``detail``, in load order (rank parts are built when they load).

    Args:
        a (Analysis): the analysis of the trace.
        trace_id (str): the trace's id, the prefix of every key.
        detail (Detail): full, critical or summary.
        hops (int): for ``critical``: the neighbourhood radius around the critical paths.
        part_ops (int): ops a part of the ranks gathers (``parts.PART_OPS``).
    """
    g = a.graph
    if detail is Detail.FULL:
        loaded = np.ones(len(g), dtype=bool)
    elif detail is Detail.CRITICAL:
        loaded = expand_hops(a, critical_nodes(a.steps), hops) | (g.collective >= 0)
    else:
        loaded = np.zeros(len(g), dtype=bool)
    head: list[tuple[str, Table]] = [("load_ranks", _ranks(a)), ("load_steps", _steps(a, trace_id))]
    tail: list[tuple[str, Table]] = []
    source = None
    if detail is not Detail.SUMMARY:
        both = loaded[g.edge_src] & loaded[g.edge_dst]
        same = g.rank[g.edge_src] == g.rank[g.edge_dst]
        source = OpSource.of(a, trace_id, loaded, _step_keys(a, trace_id), both & same, part_ops)
        head.append(("load_collectives", _collectives(a)))
        tail += [*_cross_rank_edges(a, both & ~same), ("load_critical_next", _critical_next(a, trace_id))]
    findings, explains = _findings(a, trace_id)
    tail += [("load_findings", findings), ("load_explains", explains)]
    keep = lambda phases: tuple((name, t) for name, t in phases if len(t))  # noqa: E731
    return GraphTables(detail=detail, hops=hops if detail is Detail.CRITICAL else 0, loaded=loaded,
                       head=keep(head), tail=keep(tail), source=source,
                       rank_sizes=tuple(source.sizes()) if source is not None else ())
