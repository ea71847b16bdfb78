"""Longest paths and latest-finish times in a weighted DAG given as edge arrays.

The same pass serves the critical path (observed weights) and replays of
edited graphs (new durations): it is a plain longest-path DP in topological
order, so networkx's ``dag_longest_path`` is an independent referee for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.errors import GraphError
from bottleneck_oracle.graph import _kernels

__all__ = ["EdgeIndex", "index_edges", "longest_path", "latest_finish"]


@dataclass(frozen=True, slots=True)
class EdgeIndex:
    """Edges grouped by target (``in_ptr``/``in_order``) and by source, plus a topological order."""

    n: int
    src: np.ndarray  # int64[E]
    dst: np.ndarray  # int64[E]
    in_ptr: np.ndarray  # int64[n+1]
    in_order: np.ndarray  # int64[E]
    out_ptr: np.ndarray  # int64[n+1]
    out_order: np.ndarray  # int64[E]
    order: np.ndarray  # int64[n], topological


def _grouped(keys: np.ndarray, n: int, present: np.ndarray | None, first: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the present edges by ``keys``; within a group, ``first`` edges come first."""
    perm = None
    if first is not None:
        perm = np.concatenate([np.flatnonzero(first), np.flatnonzero(~first)])
        keys = keys[perm]
    if present is not None:
        keys = np.where(present if perm is None else present[perm], keys, n)  # absent: an extra group
    ptr, order = _kernels.csr(keys, n + 1)
    order = order[: ptr[n]]
    return ptr[: n + 1], (order if perm is None else perm[order])


def index_edges(n: int, src: np.ndarray, dst: np.ndarray, *, present: np.ndarray | None = None,
                first: np.ndarray | None = None) -> EdgeIndex:
    """Groups the edges of an ``n``-node graph and orders its nodes topologically.

    Args:
        present (np.ndarray | None): bool[E], edges that take part (default: all).
        first (np.ndarray | None): bool[E], edges listed first among a node's in-edges, so
            that they win ties in ``longest_path``.

    Raises:
        GraphError: the graph has a cycle.
    """
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    in_ptr, in_order = _grouped(dst, n, present, first)
    out_ptr, out_order = _grouped(src, n, present, None)
    order = _kernels.topological_order(n, in_ptr, dst, out_ptr, out_order)
    if len(order) < n:
        stuck = np.setdiff1d(np.arange(n), order)
        raise GraphError(f"the execution graph has a cycle through {len(stuck)} points (first: {stuck[0]})")
    return EdgeIndex(n, src, dst, in_ptr, in_order, out_ptr, out_order, order)


def longest_path(index: EdgeIndex, weight: np.ndarray, *, only: np.ndarray | None = None,
                 dist0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Longest distance from any source to every node.

    Args:
        index (EdgeIndex): the graph.
        weight (np.ndarray): int64[E] edge weights; edges with weight < 0 are absent.
        only (np.ndarray | None): bool[n], the nodes to compute (default: all); the others keep ``dist0``
            and their pred is -1. Every node that a changed weight can reach must be in it.
        dist0 (np.ndarray | None): int64[n], the distances of the nodes outside ``only``.

    Returns:
        ``(dist int64[n], pred int64[n])``: the distance, and the edge it comes
        through (-1 at sources). On ties the edge earlier in ``in_order`` wins.
    """
    w = np.ascontiguousarray(weight, dtype=np.int64)
    order = index.order if only is None else index.order[only[index.order]]
    return _kernels.longest_path(order, index.src, w, index.in_ptr, index.in_order, dist0)


def latest_finish(index: EdgeIndex, weight: np.ndarray, deadline: np.ndarray) -> np.ndarray:
    """Latest time every node may reach without pushing any node past its deadline.

    Args:
        weight (np.ndarray): int64[E], edges with weight < 0 are ignored.
        deadline (np.ndarray): int64[n].
    """
    w = np.where(weight < 0, np.iinfo(np.int64).min // 4, weight).astype(np.int64, copy=False)
    return _kernels.latest_finish(index.order, index.dst, w, index.out_ptr, index.out_order,
                                  np.ascontiguousarray(deadline, dtype=np.int64))
