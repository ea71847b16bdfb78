"""ExecGraph steps → PyG ``HeteroData``: features from the trace alone, labels from the analysis.

One sample is one profiler step across every rank. Features are what a trace
shows before any analysis (durations, start offsets within the rank's step,
op class from name patterns, a hashed name, role, bytes, collective type and
size, stream or thread, rank, degree); the labels (critical-path membership,
share of the step's wall time, the step's wall time) come from the analysis
and never feed back into a feature. What-if edits of these graphs are in
``gnn/edits``, their PyG form in ``gnn/hetero``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.intervals import covered, merged
from bottleneck_oracle.graph.op_classes import COLLECTIVES, HASH_BUCKETS, OP_CLASSES, classify_strings
from bottleneck_oracle.graph.types import EdgeType, NodeKind, Role

__all__ = [
    "NODE_TYPES", "FEATURES", "COLUMN", "REMOVED_LOG_SPEEDUP", "GraphColumns", "StepGraph", "step_graphs",
    "step_features", "typed_edges", "node_ranks", "time_columns",
]

NODE_TYPES = ("cpu_op", "annotation", "runtime", "kernel", "memcpy", "comm")
_TYPE_OF_KIND = {
    NodeKind.CPU_OP: 0, NodeKind.PYTHON: 0, NodeKind.ANNOTATION: 1, NodeKind.RUNTIME: 2,
    NodeKind.KERNEL: 3, NodeKind.MEMCPY: 4, NodeKind.MEMSET: 4, NodeKind.COMM: 5,
}
_SCALARS = (
    "log_dur_us", "dur_ms", "log_start_us", "start_ms", "log_end_us", "end_ms", "edited", "edit_log_speedup",
    "removed", "rank_frac", "log2_world", "log_bytes", "log_elems", "log_group", "gpu_lane", "lane_slot",
    "log_in_deg", "log_out_deg", "depth", "log_rank_span_us", "log_to_rank_end_us", "rank_span_frac", "longest_rank",
    "log_gap_before_us", "log_gap_after_us", "log_launch_lag_us", "log_saved_us", "gstart_ms",
    "log_overlap_us",
)
FEATURES: tuple[str, ...] = (
    _SCALARS + tuple(f"class_{c}" for c, _ in OP_CLASSES) + tuple(f"coll_{c}" for c in COLLECTIVES)
    + tuple(f"role_{r.name.lower()}" for r in Role) + tuple(f"hash_{i}" for i in range(HASH_BUCKETS))
)
COLUMN = {name: i for i, name in enumerate(FEATURES)}  # feature name -> its column in x
_MS = 100.0  # linear time features in units of 100 ms
REMOVED_LOG_SPEEDUP = 5.0  # log speed-up standing for "removed"


@dataclass(frozen=True, slots=True)
class StepGraph:
    """One step of one trace, ready for the model.

    Args:
        step (int): ProfilerStep number.
        node (np.ndarray): int64[n] node ids in the ExecGraph.
        ntype (np.ndarray): int8[n] index into NODE_TYPES.
        x (np.ndarray): float32[n, len(FEATURES)] features as observed.
        edges (dict): (src type, relation, dst type) → int64[2, E] node positions in this step.
        step_ms (float): label: the step's wall time (its slowest rank).
        on_path (np.ndarray): bool[n] label: on the slowest rank's critical path.
        share (np.ndarray): float32[n] label: the share of that wall time the node accounts for.
        path (np.ndarray): int64[K] label: that critical path as node positions in time order, a node
            listed again where the path comes back to it (a parent after its child).
        has_labels (bool): False for an edited graph whose per-node truth is unknown.
    """

    step: int
    node: np.ndarray
    ntype: np.ndarray
    x: np.ndarray
    edges: dict[tuple[str, str, str], np.ndarray]
    step_ms: float
    on_path: np.ndarray
    share: np.ndarray
    path: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    has_labels: bool = True
    meta: dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.node)


def _node_types(g: ExecGraph) -> np.ndarray:
    table = np.full(max(int(k) for k in NodeKind) + 1, -1, dtype=np.int8)
    for kind, t in _TYPE_OF_KIND.items():
        table[kind] = t
    return table[g.kind]


@dataclass(frozen=True, slots=True)
class GraphColumns:
    """What every step of one graph reads: each node's type, its name's op class, collective type and hash
    bucket, its lane's slot, and each (rank, step)'s start in the CPU program."""

    ntype: np.ndarray
    cache: dict[str, np.ndarray]
    start_of: dict[tuple[int, int], int]

    @classmethod
    def of(cls, g: ExecGraph) -> GraphColumns:
        op, coll, bucket = classify_strings(g.trace.strings)
        # a node's place in its step's CPU program: a window opened late by a GPU running behind would clip it
        start_of = {(int(r), int(s)): int(t) for r, s, t in zip(g.steps.rank, g.steps.step, g.steps.cpu_start_ns)}
        return cls(_node_types(g), {"op": op, "coll": coll, "bucket": bucket, "lane_slot": _lane_slots(g)}, start_of)

    def step_start(self, g: ExecGraph, nodes: np.ndarray, step: int) -> np.ndarray:
        """int64 per node of ``nodes`` (all in ``step``): its rank's start of the step (0: not known)."""
        return np.array([self.start_of.get((int(r), step), 0) for r in g.rank[nodes]], dtype=np.int64)


def step_features(g: ExecGraph, columns: GraphColumns, nodes: np.ndarray, edges: tuple[np.ndarray, ...],
                  step_start: np.ndarray, world: int, origin: int, longest_us: float | None = None) -> np.ndarray:
    """float32[len(nodes), len(FEATURES)]: the features of a step's ``nodes``.

    Args:
        edges: (src, dst, type) of the step's edges as positions in ``nodes``; positions past them are nodes of
            other ranks (they count in the degrees).
        world: the job's ranks; ``origin``: the earliest rank's step start (ns, on ``g``'s clock).
        longest_us: the longest rank's span of the step, when ``nodes`` are not all of the job's (one rank's).
    """
    src, dst, etype = edges
    n = len(nodes)
    in_deg, out_deg = np.bincount(dst, minlength=n)[:n], np.bincount(src, minlength=n)[:n]
    x = _static_features(g, nodes, step_start, columns.cache, in_deg, out_deg, world, origin, longest_us)
    _gap_columns(x, g, nodes, src, dst, etype)
    _overlap_column(x, g, nodes)
    return x


def typed_edges(src: np.ndarray, dst: np.ndarray, etype: np.ndarray, t: np.ndarray,
                bidirectional: bool) -> dict[tuple[str, str, str], np.ndarray]:
    """(source type, relation, target type) → int64[2, E] positions: one relation per DAG edge type between two
    node types (``t``: each position's), and its reverse with ``bidirectional``."""
    edges: dict[tuple[str, str, str], np.ndarray] = {}
    for e in np.unique(etype):
        sel = etype == e
        s, d = src[sel], dst[sel]
        for ts in np.unique(t[s]):
            for td in np.unique(t[d]):
                pick = (t[s] == ts) & (t[d] == td)
                if not pick.any():
                    continue
                rel = EdgeType(int(e)).name.lower()
                pair = np.stack([s[pick], d[pick]])
                edges[(NODE_TYPES[ts], rel, NODE_TYPES[td])] = pair
                if bidirectional:
                    edges[(NODE_TYPES[td], f"rev_{rel}", NODE_TYPES[ts])] = pair[::-1].copy()
    return edges


def _static_features(g: ExecGraph, nodes: np.ndarray, step_start: np.ndarray, cache: dict[str, np.ndarray],
                     in_deg: np.ndarray, out_deg: np.ndarray, world: int, origin: int,
                     longest_us: float | None) -> np.ndarray:
    ev = g.trace.events
    x = np.zeros((len(nodes), len(FEATURES)), dtype=np.float32)
    dur_us = g.dur_ns[nodes] / 1e3
    start_us = np.maximum(g.start_ns[nodes] - step_start, 0) / 1e3
    world = max(world, 1)
    rank = g.rank[nodes]
    x[:, COLUMN["rank_frac"]] = rank / max(world - 1, 1)
    x[:, COLUMN["log2_world"]] = np.log2(world)
    event = g.event[nodes]
    x[:, COLUMN["log_bytes"]] = np.log1p(np.maximum(ev.nbytes[event], 0)) / 20
    x[:, COLUMN["log_elems"]] = np.log1p(np.maximum(ev.nelems[event], 0)) / 20
    x[:, COLUMN["log_group"]] = np.log1p(np.maximum(ev.group_size[event], 0))
    lanes = g.trace.lanes
    x[:, COLUMN["gpu_lane"]] = lanes.is_gpu[g.lane[nodes]]
    x[:, COLUMN["lane_slot"]] = cache["lane_slot"][g.lane[nodes]] / 8
    x[:, COLUMN["log_in_deg"]] = np.log1p(in_deg)
    x[:, COLUMN["log_out_deg"]] = np.log1p(out_deg)
    x[:, COLUMN["depth"]] = np.minimum(g.depth[nodes], 20) / 10
    name = g.name[nodes]
    rows = np.arange(len(nodes))
    op, coll, bucket = cache["op"][name], cache["coll"][name], cache["bucket"][name]
    first = COLUMN[f"class_{OP_CLASSES[0][0]}"]
    x[rows[op >= 0], first + op[op >= 0]] = 1
    first = COLUMN[f"coll_{COLLECTIVES[0]}"]
    x[rows[coll >= 0], first + coll[coll >= 0]] = 1
    x[rows, COLUMN["role_other"] + g.role[nodes]] = 1
    x[rows, COLUMN["hash_0"] + bucket] = 1
    # start against the earliest rank's step start: comparable across ranks, as a walk along
    # collective edges needs
    x[:, COLUMN["gstart_ms"]] = (g.start_ns[nodes] - origin) / 1e6 / _MS
    time_columns(x, dur_us, start_us, longest_us)
    return x


def node_ranks(x: np.ndarray) -> np.ndarray:
    """int64[n]: the rank of every node, read back from its features."""
    world = 2 ** x[:, COLUMN["log2_world"]].astype(np.float64)
    return np.rint(x[:, COLUMN["rank_frac"]] * np.maximum(world - 1, 1)).astype(np.int64)


def time_columns(x: np.ndarray, dur_us: np.ndarray, start_us: np.ndarray, longest_us: float | None = None) -> None:
    """Time features from durations and start offsets; the rank columns must be filled already.

    Besides the node's own times: how long its rank's step spans, how far the node
    ends from that span's end, the span against the longest rank's (``longest_us``, when
    ``x`` holds some ranks only), and whether the node's rank is the longest.
    """
    end_us = start_us + dur_us
    rank = node_ranks(x)
    span = np.zeros(rank.max() + 1 if len(rank) else 1)
    np.maximum.at(span, rank, end_us)
    rank_span = span[rank]
    longest = span.max() if longest_us is None else longest_us
    x[:, COLUMN["log_rank_span_us"]] = np.log1p(rank_span)
    x[:, COLUMN["log_to_rank_end_us"]] = np.log1p(rank_span - end_us)
    x[:, COLUMN["rank_span_frac"]] = rank_span / max(longest, 1e-9)
    x[:, COLUMN["longest_rank"]] = rank_span == longest
    x[:, COLUMN["log_dur_us"]] = np.log1p(dur_us)
    x[:, COLUMN["dur_ms"]] = dur_us / 1e3 / _MS
    x[:, COLUMN["log_start_us"]] = np.log1p(start_us)
    x[:, COLUMN["start_ms"]] = start_us / 1e3 / _MS
    x[:, COLUMN["log_end_us"]] = np.log1p(end_us)
    x[:, COLUMN["end_ms"]] = end_us / 1e3 / _MS


def _gap_columns(x: np.ndarray, g: ExecGraph, nodes: np.ndarray, src: np.ndarray, dst: np.ndarray,
                 etype: np.ndarray) -> None:
    """How long a node waited after its lane predecessor ended, how long its lane then stayed idle
    after it, and how long a GPU node started after the call that launched it: raw timestamp gaps."""
    start, end = g.start_ns[nodes], g.start_ns[nodes] + g.dur_ns[nodes]
    lane = (etype == EdgeType.THREAD_NEXT) | (etype == EdgeType.STREAM_NEXT)
    gap = np.maximum(start[dst[lane]] - end[src[lane]], 0) / 1e3
    before, after = np.zeros(len(nodes)), np.zeros(len(nodes))
    np.maximum.at(before, dst[lane], gap)
    np.maximum.at(after, src[lane], gap)
    launch = etype == EdgeType.LAUNCH
    lag = np.zeros(len(nodes))
    np.maximum.at(lag, dst[launch], np.maximum(start[dst[launch]] - start[src[launch]], 0) / 1e3)
    x[:, COLUMN["log_gap_before_us"]] = np.log1p(before)
    x[:, COLUMN["log_gap_after_us"]] = np.log1p(after)
    x[:, COLUMN["log_launch_lag_us"]] = np.log1p(lag)


def _overlap_column(x: np.ndarray, g: ExecGraph, nodes: np.ndarray) -> None:
    """How long each GPU compute node ran alongside its rank's communication, and each communication
    node alongside its rank's compute: where the two interfere, a speed-up of one changes the other."""
    kind, rank = g.kind[nodes], g.rank[nodes]
    start = g.start_ns[nodes]
    end = start + g.dur_ns[nodes]
    comm = kind == NodeKind.COMM
    compute = (kind == NodeKind.KERNEL) | (kind == NodeKind.MEMCPY) | (kind == NodeKind.MEMSET)
    overlap = np.zeros(len(nodes))
    for r in np.unique(rank[comm | compute]):
        mine_rank = rank == r
        for mine, other in ((compute, comm), (comm, compute)):
            target = np.flatnonzero(mine & mine_rank)
            s, e = merged(start[other & mine_rank], end[other & mine_rank])
            overlap[target] = covered(s, e, start[target], end[target])
    x[:, COLUMN["log_overlap_us"]] = np.log1p(overlap / 1e3)


def _lane_slots(g: ExecGraph) -> np.ndarray:
    """Each lane's order among its rank's lanes of the same side (CPU threads, GPU streams), capped at 7."""
    lanes = g.trace.lanes
    slot = np.zeros(len(lanes.rank), dtype=np.float32)
    seen: dict[tuple[int, bool], int] = {}
    for i in np.lexsort((lanes.stream, lanes.is_gpu, lanes.rank)):
        key = (int(lanes.rank[i]), bool(lanes.is_gpu[i]))
        slot[i] = min(seen.get(key, 0), 7)
        seen[key] = seen.get(key, 0) + 1
    return slot


def _labels(a: Analysis, step: int, nodes: np.ndarray,
            local: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    reports = [r for r in a.steps if r.step == step and (r.step, r.rank) not in a.partial_steps]
    slowest = max(reports, key=lambda r: r.wall_ns)
    wall = max(slowest.wall_ns, 1)
    owned = slowest.path_node >= 0
    contrib = np.zeros(len(a.graph), dtype=np.float64)
    np.add.at(contrib, slowest.path_node[owned], slowest.path_dur_ns[owned])
    on_path = np.zeros(len(a.graph), dtype=bool)
    on_path[slowest.path_node[owned]] = True
    # the path's nodes in time order, without the ProfilerStep range it passes through between
    # top-level ops, and once per visit
    order = np.argsort(slowest.path_start_ns, kind="stable")
    visits = local[slowest.path_node[order][owned[order]]]
    visits = visits[visits >= 0]
    if len(visits):
        visits = visits[np.r_[True, visits[1:] != visits[:-1]]]
    return wall / 1e6, on_path[nodes], (contrib[nodes] / wall).astype(np.float32), visits.astype(np.int64)


def _bounded(g: ExecGraph, nodes: np.ndarray, max_nodes: int) -> np.ndarray:
    """``nodes``, or when there are more than ``max_nodes`` those of the ranks that end last, as many
    ranks as fit (none when the last alone does not)."""
    if len(nodes) <= max_nodes:
        return nodes
    rank = g.rank[nodes]
    ends = g.start_ns[nodes] + g.dur_ns[nodes]
    ranks = np.unique(rank)
    last_end = np.array([ends[rank == r].max() for r in ranks])
    sizes = np.array([(rank == r).sum() for r in ranks])
    order = np.argsort(-last_end, kind="stable")
    fits = np.cumsum(sizes[order]) <= max_nodes
    return nodes[np.isin(rank, ranks[order][fits])] if fits[0] else nodes[:0]


def step_graphs(a: Analysis, *, bidirectional: bool = True, max_nodes: int = 200_000,
                steps: tuple[int, ...] = ()) -> list[StepGraph]:
    """Every complete step of ``a`` (or only ``steps``) as a StepGraph.

    Features come from ``a.graph`` only; labels from the critical paths of ``a.steps``.
    A step of more than ``max_nodes`` nodes keeps its longest-running ranks, the
    longest first, as many as fit (memory stays bounded; the path is labelled on
    what is kept); a step whose longest rank alone is larger is skipped.
    """
    g = a.graph
    columns = GraphColumns.of(g)
    complete = {r.step for r in a.steps if r.step >= 0} - {s for s, _ in a.partial_steps}
    if steps:
        complete &= set(steps)
    step_of = g.step
    keep = (columns.ntype >= 0) & (g.role != Role.STEP)
    out = []
    for step in sorted(complete):
        nodes = _bounded(g, np.flatnonzero(keep & (step_of == step)), max_nodes)
        if not len(nodes):
            continue
        local = np.full(len(g), -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        src, dst = local[g.edge_src], local[g.edge_dst]
        inside = (src >= 0) & (dst >= 0)
        src, dst, etype = src[inside], dst[inside], g.edge_type[inside]
        step_start = columns.step_start(g, nodes, step)
        known = step_start[step_start > 0]
        origin = int(known.min() if len(known) else g.start_ns[nodes].min())
        x = step_features(g, columns, nodes, (src, dst, etype), step_start, len(g.trace.ranks), origin)
        t = columns.ntype[nodes]
        edges = typed_edges(src, dst, etype, t, bidirectional)
        step_ms, on_path, share, path = _labels(a, step, nodes, local)
        out.append(StepGraph(step=step, node=nodes, ntype=t, x=x, edges=edges, step_ms=step_ms,
                             on_path=on_path, share=share, path=path))
    return out
