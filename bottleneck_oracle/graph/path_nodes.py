"""What the detectors read of the nodes a critical path runs through: name, kind, role, whether a pipeline
transfer, whether inside a checkpoint.

A step's path can run through other ranks. ``analyze`` reads those from its one graph. A scan's task has its
rank's graph only: the nodes of other ranks on its paths come from the driver (``ForeignNodes``), numbered
after the graph's own; the driver reads every rank's from their summaries (``summary.NodeNames``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from bottleneck_oracle.graph.graph import CollectiveTable, ExecGraph
from bottleneck_oracle.graph.types import Role

__all__ = ["ForeignNodes", "GraphNodes", "PathNodes", "checkpoint_ranges", "p2p_instances", "p2p_nodes", "p2p_peers"]


class PathNodes(Protocol):
    """The nodes of critical paths, by the ids the paths give them."""

    def node_name(self, node: int) -> str: ...

    def kinds(self, nodes: np.ndarray) -> np.ndarray:
        """int8 ``NodeKind`` of each of ``nodes`` (ids >= 0)."""
        ...

    def p2p(self, nodes: np.ndarray) -> np.ndarray:
        """bool: each of ``nodes`` (ids >= 0) is a member of a point-to-point transfer (``p2p_nodes``)."""
        ...

    def roles(self, nodes: np.ndarray) -> np.ndarray:
        """int8 ``Role`` of each of ``nodes`` (ids >= 0)."""
        ...

    def in_checkpoint(self, nodes: np.ndarray) -> np.ndarray:
        """bool: each of ``nodes`` (ids >= 0) is a checkpoint's range or runs inside one."""
        ...


def p2p_instances(table: CollectiveTable) -> np.ndarray:
    """bool[instances]: point-to-point transfers (two-member send/recv instances: pipeline stages)."""
    return np.array([k == "sendrecv" and m == 2 for k, m in zip(table.kind, table.members.tolist())], dtype=bool)


def p2p_nodes(g: ExecGraph) -> np.ndarray:
    """bool[N]: comm nodes of point-to-point transfers (``p2p_instances``)."""
    p2p = np.append(p2p_instances(g.collectives), False)
    return p2p[np.where(g.collective >= 0, g.collective, len(g.collectives))]


def p2p_peers(instance: np.ndarray, rank: np.ndarray, table: CollectiveTable) -> dict[int, list[int]]:
    """Per rank, the ranks it has pipeline transfers with, in order, from every member's instance (-1: none)
    and rank: one graph's nodes, or every rank's summary's members."""
    keep = instance >= 0
    keep[keep] = p2p_instances(table)[instance[keep]]
    pairs = np.unique(np.stack([instance[keep], rank[keep]], axis=1), axis=0)  # (instance, rank), by instance
    out: dict[int, set[int]] = defaultdict(set)
    for ranks in np.split(pairs[:, 1], np.flatnonzero(np.diff(pairs[:, 0])) + 1):
        for r in ranks.tolist():
            out[r].update(x for x in ranks.tolist() if x != r)
    return {r: sorted(v) for r, v in sorted(out.items())}


@dataclass(frozen=True, slots=True)
class ForeignNodes:
    """Nodes of other ranks on one rank's paths, numbered after its graph's nodes: what ``PathNodes`` says of each."""

    names: tuple[str, ...] = ()
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    p2p: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    role: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    in_checkpoint: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


class GraphNodes:
    """The nodes of ``g``, then ``foreign`` numbered from ``len(g)``."""

    def __init__(self, g: ExecGraph, foreign: ForeignNodes | None = None) -> None:
        self._g = g
        self._foreign = foreign or ForeignNodes()
        own = len(self._foreign.names) == 0  # the whole graph's: no copy
        self._kind = g.kind if own else np.concatenate([g.kind, self._foreign.kind])
        self._role = g.role if own else np.concatenate([g.role, self._foreign.role])
        self._p2p = p2p_nodes(g) if own else np.concatenate([p2p_nodes(g), self._foreign.p2p])
        self._in_checkpoint: np.ndarray | None = None

    def node_name(self, node: int) -> str:
        n = len(self._g)
        return self._g.node_name(node) if node < n else self._foreign.names[node - n]

    def kinds(self, nodes: np.ndarray) -> np.ndarray:
        return self._kind[nodes]

    def p2p(self, nodes: np.ndarray) -> np.ndarray:
        return self._p2p[nodes]

    def roles(self, nodes: np.ndarray) -> np.ndarray:
        return self._role[nodes]

    def in_checkpoint(self, nodes: np.ndarray) -> np.ndarray:
        if self._in_checkpoint is None:  # on first use: most traces have no checkpoint on a path
            self._in_checkpoint = np.concatenate([checkpoint_ranges(self._g), self._foreign.in_checkpoint])
        return self._in_checkpoint[nodes]


def checkpoint_ranges(g: ExecGraph) -> np.ndarray:
    """bool[N]: the nodes of ``g`` that are a checkpoint's range or run inside one."""
    return g.under(g.role == Role.CHECKPOINT)
