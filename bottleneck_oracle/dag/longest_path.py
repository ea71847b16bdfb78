"""Longest paths and latest-finish times in a weighted DAG given as edge arrays.

The same pass serves the critical path (observed weights) and replays of
edited graphs (new durations): it is a plain longest-path DP in topological
order, so networkx's ``dag_longest_path`` is an independent referee for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.dag import _kernels
from bottleneck_oracle.errors import GraphError

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


def index_edges(n: int, src: np.ndarray, dst: np.ndarray) -> EdgeIndex:
    """Groups the edges of an ``n``-node graph and orders its nodes topologically.

    Raises:
        GraphError: the graph has a cycle.
    """
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    in_ptr, in_order = _kernels.csr(dst, n)
    out_ptr, out_order = _kernels.csr(src, n)
    order = _kernels.topological_order(n, src, dst, out_ptr, out_order)
    if len(order) < n:
        stuck = np.setdiff1d(np.arange(n), order)
        raise GraphError(f"the execution graph has a cycle through {len(stuck)} points (first: {stuck[0]})")
    return EdgeIndex(n, src, dst, in_ptr, in_order, out_ptr, out_order, order)


def longest_path(index: EdgeIndex, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest distance from any source to every node.

    Args:
        index (EdgeIndex): the graph.
        weight (np.ndarray): int64[E] edge weights; edges with weight < 0 are absent.

    Returns:
        ``(dist int64[n], pred int64[n])``: the distance, and the edge it comes
        through (-1 at sources). On ties the edge earlier in ``in_order`` wins.
    """
    w = np.ascontiguousarray(weight, dtype=np.int64)
    if (w < 0).any():
        keep = w >= 0
        sub = index_edges(index.n, index.src[keep], index.dst[keep])
        dist, pred = _kernels.longest_path(sub.order, sub.src, w[keep], sub.in_ptr, sub.in_order)
        return dist, np.where(pred >= 0, np.flatnonzero(keep)[np.maximum(pred, 0)], -1)
    return _kernels.longest_path(index.order, index.src, w, index.in_ptr, index.in_order)


def latest_finish(index: EdgeIndex, weight: np.ndarray, deadline: np.ndarray) -> np.ndarray:
    """Latest time every node may reach without pushing any node past its deadline.

    Args:
        weight (np.ndarray): int64[E], edges with weight < 0 are ignored.
        deadline (np.ndarray): int64[n].
    """
    w = np.where(weight < 0, np.iinfo(np.int64).min // 4, weight).astype(np.int64)
    return _kernels.latest_finish(index.order, index.dst, w, index.out_ptr, index.out_order,
                                  np.ascontiguousarray(deadline, dtype=np.int64))
