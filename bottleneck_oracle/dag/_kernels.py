"""Compiled single-pass loops of the DAG layer (numba): nesting, CSR, longest path, slack.

Each loop is O(nodes + edges) over arrays in a known order; everything around
them is vectorized numpy. Compiled code is cached on disk after the first run.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "lane_nesting", "csr", "topological_order", "longest_path", "latest_finish",
    "walk_back", "select_binding",
]

_jit = numba.njit(cache=True, nogil=True)

# chain-edge modes (how the segment before a point on a lane constrains it)
CROSS, BUSY, GAP, BLOCKING, LANE_GAP, COMM = 0, 1, 2, 3, 4, 5


@_jit
def lane_nesting(lane, start, end, tol):  # type: ignore[no-untyped-def]
    """Nests the events of each lane and lists the lane's points in program order.

    Input rows are sorted by (lane, start, -duration). Point 2i is the start of
    row i, 2i+1 its end. A child that ends after its parent is clamped to the
    parent's end. Returns ``parent, depth, end (clamped), n_overlaps`` and the
    chain edges ``src, dst, owner`` (owner: the innermost open row during the
    segment, -1 for none).
    """
    n = len(start)
    end = end.copy()
    parent = np.full(n, -1, np.int32)
    depth = np.zeros(n, np.int16)
    src = np.empty(2 * n, np.int64)
    dst = np.empty(2 * n, np.int64)
    owner = np.empty(2 * n, np.int32)
    stack = np.empty(n + 1, np.int64)
    m = 0
    overlaps = 0
    i = 0
    while i < n:
        cur = lane[i]
        top = 0
        prev = -1
        while i < n and lane[i] == cur:
            s = start[i]
            while top > 0 and end[stack[top - 1]] <= s:
                j = stack[top - 1]
                if prev >= 0:
                    src[m] = prev
                    dst[m] = 2 * j + 1
                    owner[m] = j
                    m += 1
                prev = 2 * j + 1
                top -= 1
            if top > 0:
                p = stack[top - 1]
                parent[i] = p
                depth[i] = depth[p] + 1
                if end[i] > end[p]:
                    if end[i] - end[p] > tol:
                        overlaps += 1
                    end[i] = end[p]
            if prev >= 0:
                src[m] = prev
                dst[m] = 2 * i
                owner[m] = stack[top - 1] if top > 0 else -1
                m += 1
            prev = 2 * i
            stack[top] = i
            top += 1
            i += 1
        while top > 0:
            j = stack[top - 1]
            src[m] = prev
            dst[m] = 2 * j + 1
            owner[m] = j
            m += 1
            prev = 2 * j + 1
            top -= 1
    return parent, depth, end, overlaps, src[:m], dst[:m], owner[:m]


@_jit
def csr(keys, n):  # type: ignore[no-untyped-def]
    """Counting sort: ``(indptr int64[n+1], order int64[E])`` grouping edges by ``keys``, stable."""
    indptr = np.zeros(n + 1, np.int64)
    for k in keys:
        indptr[k + 1] += 1
    for v in range(n):
        indptr[v + 1] += indptr[v]
    fill = indptr[:-1].copy()
    order = np.empty(len(keys), np.int64)
    for e in range(len(keys)):
        k = keys[e]
        order[fill[k]] = e
        fill[k] += 1
    return indptr, order


@_jit
def topological_order(n, src, dst, out_ptr, out_order):  # type: ignore[no-untyped-def]
    """Kahn's algorithm; returns fewer than ``n`` nodes when the graph has a cycle."""
    indeg = np.zeros(n, np.int64)
    for e in range(len(dst)):
        indeg[dst[e]] += 1
    order = np.empty(n, np.int64)
    head = 0
    tail = 0
    for v in range(n):
        if indeg[v] == 0:
            order[tail] = v
            tail += 1
    while head < tail:
        u = order[head]
        head += 1
        for k in range(out_ptr[u], out_ptr[u + 1]):
            v = dst[out_order[k]]
            indeg[v] -= 1
            if indeg[v] == 0:
                order[tail] = v
                tail += 1
    return order[:tail]


@_jit
def longest_path(order, src, weight, in_ptr, in_order):  # type: ignore[no-untyped-def]
    """Longest distance to every node from any source, and the edge that gives it.

    Pulls over in-edges in ``in_order``; on ties the earlier edge wins.
    Returns ``(dist int64[n], pred_edge int64[n])``; sources have dist 0, pred -1.
    """
    n = len(in_ptr) - 1
    dist = np.zeros(n, np.int64)
    pred = np.full(n, -1, np.int64)
    for v in order:
        best = np.int64(0)
        arg = -1
        for k in range(in_ptr[v], in_ptr[v + 1]):
            e = in_order[k]
            d = dist[src[e]] + weight[e]
            if arg < 0 or d > best:
                best = d
                arg = e
        if arg >= 0:
            dist[v] = best
            pred[v] = arg
    return dist, pred


@_jit
def latest_finish(order, dst, weight, out_ptr, out_order, deadline):  # type: ignore[no-untyped-def]
    """Latest time each node may reach without delaying any deadline: min(deadline, succ - w)."""
    n = len(out_ptr) - 1
    lf = deadline.copy()
    for i in range(len(order) - 1, -1, -1):
        u = order[i]
        for k in range(out_ptr[u], out_ptr[u + 1]):
            e = out_order[k]
            cand = lf[dst[e]] - weight[e]
            if cand < lf[u]:
                lf[u] = cand
    return lf


@_jit
def walk_back(pred, src, t, sink, stop):  # type: ignore[no-untyped-def]
    """Edges of the path ending at ``sink``, in time order, until a point at or before ``stop``."""
    out = []
    v = sink
    while pred[v] >= 0:
        e = pred[v]
        out.append(e)
        v = src[e]
        if t[v] <= stop:
            break
    res = np.empty(len(out), np.int64)
    for i in range(len(out)):
        res[i] = out[len(out) - 1 - i]
    return res


@_jit
def select_binding(t, src, mode, minlag, in_ptr, in_order, wake_tol, contra_tol):  # type: ignore[no-untyped-def]
    """Chooses, for every point, the in-edge that released it and weighs every edge.

    The binding edge gets the observed delay t(dst) - t(src); every other edge
    its minimum lag, capped at the observed delay, so that a longest-path pass
    reproduces the observed times and follows the binding edges. Edges the
    data contradict (their source after their target) get weight -1 (dropped).
    Returns ``(weight int64[E], binding int64[P], contradicted)``.
    """
    n = len(in_ptr) - 1
    weight = np.empty(len(src), np.int64)
    binding = np.full(n, -1, np.int64)
    late = np.zeros(n, np.bool_)
    contradicted = 0
    for v in range(n):
        lo = in_ptr[v]
        hi = in_ptr[v + 1]
        if lo == hi:
            continue
        chain = -1
        for k in range(lo, hi):
            e = in_order[k]
            if mode[e] != CROSS:
                chain = e
        best = -1
        best_arr = np.int64(0)
        if chain >= 0 and mode[chain] == BUSY:
            best = chain
        elif chain >= 0 and mode[chain] == GAP:
            # the latest dependency that arrived while the thread idled released it; if the thread
            # then took longer than wake_tol to run, the rest of the wait is its own (late)
            best = chain
            for k in range(lo, hi):
                e = in_order[k]
                if mode[e] != CROSS:
                    continue
                arr = t[src[e]] + minlag[e]
                if t[src[e]] > t[v]:
                    continue
                if arr >= t[src[chain]] and arr <= t[v] + contra_tol:
                    if best == chain or arr > best_arr:
                        best = e
                        best_arr = arr
            if best != chain and t[v] - best_arr > wake_tol:
                late[v] = True
        else:
            if chain >= 0:
                best = chain
                best_arr = t[src[chain]] + minlag[chain]
            for k in range(lo, hi):
                e = in_order[k]
                if e == chain:
                    continue
                arr = t[src[e]] + minlag[e]
                if arr > t[v] + contra_tol or t[src[e]] > t[v]:
                    continue
                if best < 0 or arr > best_arr:
                    best = e
                    best_arr = arr
        for k in range(lo, hi):
            e = in_order[k]
            obs = t[v] - t[src[e]]
            if obs < 0 or (e != best and t[src[e]] + minlag[e] > t[v] + contra_tol):
                weight[e] = -1
                contradicted += 1
            elif e == best:
                weight[e] = obs
            else:
                weight[e] = min(minlag[e], obs)
        if best >= 0 and weight[best] >= 0:
            binding[v] = best
            for k in range(lo, hi):  # the binding edge first: longest_path keeps it on ties
                if in_order[k] == best:
                    in_order[k] = in_order[lo]
                    in_order[lo] = best
                    break
    return weight, binding, late, contradicted
