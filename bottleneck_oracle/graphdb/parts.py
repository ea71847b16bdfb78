"""A trace's ops cut into load parts of whole ranks, so that ranks load in parallel (Ray tasks, each with
its own connection) and no process holds every rank's rows at once.

A part holds consecutive ranks, as many as make ``PART_OPS`` ops (one rank, however large, is never
split): their ops (inside a step, then outside every step), their links to the collective instances
they take part in, and the DAG edges between two ops of one rank. Fewer, larger parts send fewer,
fuller batches: with a part per rank, a 64-rank job of 9,000-op ranks sent 611 batches where the whole
trace needs 195, and loaded 9% slower. Edges between ranks need both ends loaded first: they go to the load's tail
(``tables.py``). ``OpSource`` is what every rank's part is
built from: numpy columns only, put once in Ray's object store and shared by the tasks; a part's
columns become Python lists only when that part loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.types import EdgeType, NodeKind, Role
from bottleneck_oracle.graphdb.schema import DAG_RELS

__all__ = ["OpSource", "PART_OPS", "edge_phase", "file_shift_ns", "to_us"]

PART_OPS = 100_000  # ops a part gathers before it closes: 10 batches of ops, about 60 MB of rows as lists

_KIND_NAMES = np.array([k.name.lower() for k in NodeKind], dtype=object)
_ROLE_NAMES = np.array([r.name.lower() for r in Role], dtype=object)
_RANK_PHASES = ("load_ops", "load_loose_ops", "load_member_of", *(f"load_edges_{DAG_RELS[e].value.lower()}" for e in EdgeType))


def edge_phase(etype: EdgeType) -> str:
    """The load phase of one DAG edge type (a built ``load_edges`` query)."""
    return f"load_edges_{DAG_RELS[etype].value.lower()}"


def to_us(ns: np.ndarray) -> list[float]:
    """Nanoseconds as µs rounded to the ns, as the graph stores times."""
    return np.round(np.asarray(ns, dtype=np.float64) / 1000.0, 3).tolist()


def file_shift_ns(a: Analysis) -> np.ndarray:
    """int64 per rank id: what turns the analysis clock into the ``ts`` each rank's file uses
    (as ``analysis.report.file_ts_us``)."""
    trace = a.graph.trace
    shift = {info.rank: trace.origin_ns - info.base_ns for info in trace.ranks}
    top = max([int(a.graph.rank.max(initial=0)), *shift]) + 1
    return np.array([shift.get(r, trace.origin_ns) for r in range(top)], dtype=np.int64)


def _own_contrib(a: Analysis) -> np.ndarray:
    """int64[N]: each node's time on the critical path of its own (step, rank)."""
    g = a.graph
    step = g.step
    out = np.zeros(len(g), dtype=np.int64)
    for r in a.steps:
        node = r.path_node
        own = (node >= 0) & (g.rank[np.maximum(node, 0)] == r.rank) & (step[np.maximum(node, 0)] == r.step)
        np.add.at(out, node[own], r.path_dur_ns[own])
    return out


def _grouped(keys: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions of ``keys`` grouped by rank in the order of ``ranks``, ascending within a rank; the
    offsets of each rank's group, len(ranks) + 1)."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], ranks, side="left")
    return order, np.append(bounds, len(order)) if len(ranks) else np.zeros(1, dtype=np.int64)


def _part_starts(rank_bounds: np.ndarray, size: int) -> np.ndarray:
    """Indexes (into the ranks) where each part starts: consecutive ranks until ``size`` ops."""
    starts, ops = [0], 0
    counts = np.diff(rank_bounds).tolist()
    for i, n in enumerate(counts[:-1]):
        ops += n
        if ops >= size:
            starts.append(i + 1)
            ops = 0
    return np.array(starts if counts else [], dtype=np.int64)


@dataclass(frozen=True, slots=True)
class OpSource:
    """The columns every rank's part is built from (see the module docstring).

    Args:
        trace_id (str): the trace, the prefix of every key.
        ranks (np.ndarray): int64, the ranks with a loaded op, ascending.
        starts (np.ndarray): int64, the index in ``ranks`` of each part's first rank.
        names, lanes (np.ndarray): object, the interned op names and the lane labels.
        step_keys (np.ndarray): object, the Step key of each step row the analysis reports (else None),
            then None for a node outside every step.
        shift_ns (np.ndarray): int64 per rank id, to the rank file's clock.
        op (dict[str, np.ndarray]): per node of the graph: name, kind, role, rank, step, lane, start_ns,
            dur_ns, slack_ns, contrib_ns (time on its own step's critical path), collective, step_row.
        nodes, node_bounds (np.ndarray): the loaded nodes grouped by part; part i's are
            ``nodes[node_bounds[i]:node_bounds[i + 1]]``.
        edge_src, edge_dst, edge_type, edge_bounds (np.ndarray): the DAG edges between two loaded ops of
            one rank, grouped by part the same way.
    """

    trace_id: str
    ranks: np.ndarray
    starts: np.ndarray
    names: np.ndarray
    lanes: np.ndarray
    step_keys: np.ndarray
    shift_ns: np.ndarray
    op: dict[str, np.ndarray]
    nodes: np.ndarray
    node_bounds: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_type: np.ndarray
    edge_bounds: np.ndarray

    @classmethod
    def of(cls, a: Analysis, trace_id: str, loaded: np.ndarray, step_keys: np.ndarray,
           within_rank: np.ndarray, part_ops: int = PART_OPS) -> OpSource:
        """The source of ``a``'s parts: ``loaded`` (bool[N]) the nodes that become Op nodes,
        ``within_rank`` (bool[E]) the edges between two loaded ops of one rank."""
        g = a.graph
        ranks = np.unique(g.rank[loaded]).astype(np.int64)
        nodes = np.flatnonzero(loaded)
        order, node_bounds = _grouped(g.rank[nodes], ranks)
        edges = np.flatnonzero(within_rank)
        edge_order, edge_bounds = _grouped(g.rank[g.edge_src[edges]], ranks)
        edges = edges[edge_order]
        starts = _part_starts(node_bounds, part_ops)
        ends = np.append(starts, len(ranks)) if len(starts) else np.zeros(1, dtype=np.int64)
        node_bounds, edge_bounds = node_bounds[ends], edge_bounds[ends]
        op = {"name": g.name, "kind": g.kind, "role": g.role, "rank": g.rank, "step": g.step, "lane": g.lane,
              "start_ns": g.start_ns, "dur_ns": g.dur_ns, "slack_ns": a.slack_ns, "contrib_ns": _own_contrib(a),
              "collective": g.collective, "step_row": g.step_row}
        return cls(trace_id, ranks, starts, np.asarray(g.trace.strings, dtype=object),
                   np.asarray(g.trace.lanes.label, dtype=object), step_keys, file_shift_ns(a), op,
                   nodes[order], node_bounds, g.edge_src[edges], g.edge_dst[edges], g.edge_type[edges], edge_bounds)

    @property
    def parts(self) -> list[str]:
        """The parts' names: ``rank<r>``, or ``ranks<first>-<last>``."""
        ends = [*self.starts[1:].tolist(), len(self.ranks)]
        first, last = self.ranks[self.starts].tolist(), self.ranks[np.array(ends, dtype=np.int64) - 1].tolist()
        return [f"rank{a}" if a == b else f"ranks{a}-{b}" for a, b in zip(first, last)]

    def _key_of(self, idx: np.ndarray) -> np.ndarray:
        row = self.op["step_row"][idx]
        return self.step_keys[np.where(row >= 0, row, len(self.step_keys) - 1)]

    def _slices(self, i: int) -> tuple[np.ndarray, slice]:
        return self.nodes[self.node_bounds[i]:self.node_bounds[i + 1]], slice(self.edge_bounds[i], self.edge_bounds[i + 1])

    def sizes(self) -> list[dict[str, int]]:
        """Rows per phase of each part (no list is built)."""
        out = []
        for i in range(len(self.starts)):
            idx, edges = self._slices(i)
            inside = int(np.count_nonzero(self._key_of(idx) != None))  # noqa: E711 - elementwise
            types = np.bincount(self.edge_type[edges], minlength=len(EdgeType))
            sizes = {"load_ops": inside, "load_loose_ops": len(idx) - inside,
                     "load_member_of": int(np.count_nonzero(self.op["collective"][idx] >= 0))}
            sizes |= {edge_phase(e): int(types[e]) for e in EdgeType}
            out.append({p: sizes[p] for p in _RANK_PHASES if sizes[p]})
        return out

    def columns(self, idx: np.ndarray) -> dict[str, list[Any]]:
        """The Op node columns of nodes ``idx``."""
        op = self.op
        rank, start = op["rank"][idx], op["start_ns"][idx]
        contrib = op["contrib_ns"][idx]
        return {
            "idx": idx.tolist(), "name": self.names[op["name"][idx]].tolist(),
            "kind": _KIND_NAMES[op["kind"][idx]].tolist(), "role": _ROLE_NAMES[op["role"][idx]].tolist(),
            "rank": rank.tolist(), "step": op["step"][idx].tolist(), "lane": self.lanes[op["lane"][idx]].tolist(),
            "ts_us": to_us(start.astype(np.int64) + self.shift_ns[rank]), "start_us": to_us(start),
            "dur_us": to_us(op["dur_ns"][idx]), "slack_us": to_us(op["slack_ns"][idx]),
            "on_path": (contrib > 0).tolist(), "contrib_us": to_us(contrib),
            "collective": [c if c >= 0 else None for c in op["collective"][idx].tolist()],
        }

    def phases(self, i: int) -> list[tuple[str, dict[str, list[Any]]]]:
        """(phase, columns) of part ``i``, in load order, empty phases left out."""
        idx, edges = self._slices(i)
        key = self._key_of(idx)
        inside = key != None  # noqa: E711 - elementwise on an object array
        ops = self.columns(idx[inside]) | {"step_key": key[inside].tolist()}
        members = idx[self.op["collective"][idx] >= 0]
        out = [("load_ops", ops), ("load_loose_ops", self.columns(idx[~inside])),
               ("load_member_of", {"op": members.tolist(), "instance": self.op["collective"][members].tolist()})]
        src, dst, etype = self.edge_src[edges], self.edge_dst[edges], self.edge_type[edges]
        for e in EdgeType:
            mask = etype == e
            out.append((edge_phase(e), {"src": src[mask].tolist(), "dst": dst[mask].tolist()}))
        return [(p, cols) for p, cols in out if cols and len(next(iter(cols.values())))]
