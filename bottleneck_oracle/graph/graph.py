"""ExecGraph: the execution DAG of a training job in numpy columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bottleneck_oracle.graph.types import EdgeType, NodeKind
from bottleneck_oracle.traces import Trace

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["ExecGraph", "StepTable", "CollectiveTable"]


@dataclass(frozen=True, slots=True)
class StepTable:
    """One row per (rank, step): each rank's ``ProfilerStep#N`` (or ``steps_from`` annotation) and its window.

    ``end_ns`` is where the step completes: the later of its CPU end and the end
    of the GPU work it launched. ``start_ns`` is where its window opens: its CPU
    start, or where the rank's earlier steps completed if that is later (the CPU
    ran ahead of the GPU; for the first step, where the GPU work queued before the
    trace completed), so the windows of a rank never overlap. ``step`` is N
    (-1 when the trace has no step annotation and the whole trace is one step).
    """

    rank: np.ndarray  # int32
    step: np.ndarray  # int32
    node: np.ndarray  # int32: the step's annotation node, -1 for a whole-trace step
    cpu_start_ns: np.ndarray  # int64: start of the annotation
    start_ns: np.ndarray  # int64: start of the window
    cpu_end_ns: np.ndarray  # int64: end of the annotation
    end_ns: np.ndarray  # int64: completion
    last_node: np.ndarray  # int64: node whose end is the completion (annotation or last GPU work), -1: none
    opened_by: np.ndarray  # int64: node whose end opens the window, -1: the CPU start

    def __len__(self) -> int:
        return len(self.step)

    def row_of(self) -> dict[tuple[int, int], int]:
        """(step, rank) → row, the key every per-step table of the analysis is looked up by."""
        return {(s, r): i for i, (s, r) in enumerate(zip(self.step.tolist(), self.rank.tolist()))}


@dataclass(frozen=True, slots=True)
class CollectiveTable:
    """One row per collective instance matched across ranks.

    ``reliable`` is false when the members' end times disagree so much that the
    match is doubtful (sampled or truncated traces); such instances get no
    cross-rank edges.
    """

    kind: tuple[str, ...]  # "allreduce", "sendrecv", ...
    key: tuple[str, ...]  # how it was matched: "comms_id", "seq", "order"
    members: np.ndarray  # int32: number of member nodes
    reliable: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.kind)


@dataclass(frozen=True, slots=True)
class ExecGraph:
    """Nodes are CPU ops, annotations, runtime calls, GPU kernels, copies and comm ops.

    Node ids are positions in the arrays; nodes of one lane are contiguous and
    sorted by (start, -duration). ``edge_*`` arrays hold the typed DAG edges.

    Shapes:
        node arrays: [N]; edge arrays: [E].
    """

    trace: Trace
    event: np.ndarray  # int64: row in trace.events
    kind: np.ndarray  # int8: NodeKind
    role: np.ndarray  # int8: Role
    rank: np.ndarray  # int32
    lane: np.ndarray  # int32: row in trace.lanes
    name: np.ndarray  # int32: index into trace.strings
    start_ns: np.ndarray  # int64
    dur_ns: np.ndarray  # int64, clamped to the parent's end
    step_row: np.ndarray  # int32: row in ``steps`` of the step holding the node, -1 outside every step
    parent: np.ndarray  # int32: enclosing node on the same lane, -1
    depth: np.ndarray  # int16
    launch_ns: np.ndarray  # int64: GPU nodes: start of the launching call; others: own start
    collective: np.ndarray  # int32: collective instance, -1
    edge_src: np.ndarray  # int32
    edge_dst: np.ndarray  # int32
    edge_type: np.ndarray  # int8: EdgeType
    steps: StepTable
    collectives: CollectiveTable
    nesting_overlaps: int  # children that ended after their parent by more than the tolerance

    def __len__(self) -> int:
        return len(self.start_ns)

    @property
    def end_ns(self) -> np.ndarray:
        """int64[N]: start + duration."""
        return self.start_ns + self.dur_ns

    @property
    def step(self) -> np.ndarray:
        """int32[N]: the ProfilerStep number of each node (-1 outside every step)."""
        return np.where(self.step_row >= 0, self.steps.step[np.maximum(self.step_row, 0)], -1)

    def under(self, flag: np.ndarray) -> np.ndarray:
        """bool[N]: ``flag`` (bool[N]) or the flag of any enclosing node on the same lane."""
        out = flag.copy()
        for d in range(1, int(self.depth.max()) + 1 if len(self) else 0):
            at = np.flatnonzero(self.depth == d)
            out[at] |= out[self.parent[at]]
        return out

    def node_name(self, node: int) -> str:
        """The op, kernel or call name of ``node``."""
        return self.trace.strings[self.name[node]]

    def edges_of(self, etype: EdgeType) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of the edges of one type."""
        mask = self.edge_type == etype
        return self.edge_src[mask], self.edge_dst[mask]

    def to_networkx(self) -> nx.MultiDiGraph:
        """The graph as a networkx MultiDiGraph, for exploration (slow on big traces).

        Nodes carry ``name, kind, rank, lane, step, start_ns, dur_ns``; edges ``type``.
        """
        import networkx as nx  # optional heavy dependency, only for users who ask

        g = nx.MultiDiGraph()
        names = self.trace.strings
        step = self.step
        for i in range(len(self)):
            g.add_node(
                i, name=names[self.name[i]], kind=NodeKind(self.kind[i]).name.lower(),
                rank=int(self.rank[i]), lane=int(self.lane[i]), step=int(step[i]),
                start_ns=int(self.start_ns[i]), dur_ns=int(self.dur_ns[i]),
            )
        for s, d, t in zip(self.edge_src.tolist(), self.edge_dst.tolist(), self.edge_type.tolist()):
            g.add_edge(s, d, type=EdgeType(t).name.lower())
        return g
