"""Python face of the graph layer's C loops (``_native.c``): nesting, CSR, longest path, slack.

Each loop is O(nodes + edges) over arrays in a known order; everything around
them is vectorized numpy. The C library is built at install time; these
wrappers allocate the outputs and check dtypes, so callers pass any integer arrays.
"""

from __future__ import annotations

import ctypes

import numpy as np

import bottleneck_oracle.graph._native as _native

__all__ = [
    "lane_nesting", "csr", "topological_order", "longest_path", "latest_finish",
    "walk_back", "mark_back", "select_binding", "boundary_paths", "CROSS", "BUSY", "GAP", "BLOCKING", "LANE_GAP", "COMM",
]

# chain-edge modes (how the segment before a point on a lane constrains it); mirrored in _native.c
CROSS, BUSY, GAP, BLOCKING, LANE_GAP, COMM = 0, 1, 2, 3, 4, 5

_LIB = ctypes.CDLL(_native.__file__)
_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p


def _fn(name: str, restype: type | None, nargs: int):  # type: ignore[no-untyped-def]
    f = getattr(_LIB, name)
    f.restype = restype
    f.argtypes = [_PTR] * nargs
    return f


def _p(a: np.ndarray) -> int:
    return a.ctypes.data


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


_lane_nesting = _LIB.lane_nesting
_lane_nesting.restype = _I64
_lane_nesting.argtypes = [_I64, _PTR, _PTR, _PTR, _I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR]
_csr = _LIB.csr
_csr.restype = None
_csr.argtypes = [_I64, _PTR, _I64, _PTR, _PTR]
_topo = _LIB.topological_order
_topo.restype = _I64
_topo.argtypes = [_I64, _PTR, _PTR, _PTR, _PTR, _PTR]
_longest = _LIB.longest_path
_longest.restype = None
_longest.argtypes = [_I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR]
_latest = _LIB.latest_finish
_latest.restype = None
_latest.argtypes = [_I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR]
_walk = _LIB.walk_back
_walk.restype = _I64
_walk.argtypes = [_PTR, _PTR, _PTR, _I64, _I64, _PTR]
_mark = _LIB.mark_back
_mark.restype = None
_mark.argtypes = [_PTR, _PTR, _PTR, _I64, _PTR]
_boundary = _LIB.boundary_paths
_boundary.restype = _I64
_boundary.argtypes = [_I64, *[_PTR] * 10, _I64, _PTR, _PTR, _PTR, _PTR, _PTR, _I64]
_select = _LIB.select_binding
_select.restype = _I64
_select.argtypes = [_I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _I64, _I64, _PTR, _PTR, _PTR]


def lane_nesting(lane: np.ndarray, start: np.ndarray, end: np.ndarray, tol: int):  # type: ignore[no-untyped-def]
    """Nests the events of each lane and lists the lane's points in program order.

    Input rows are sorted by (lane, start, -duration). Point 2i is the start of
    row i, 2i+1 its end. A child that ends after its parent is clamped to the
    parent's end. Returns ``parent int32, depth int16, end (clamped), n_overlaps``
    and the chain edges ``src, dst, owner`` (owner: the innermost open row during
    the segment, -1 for none).
    """
    n = len(start)
    lane, start, end = _i64(lane), _i64(start), _i64(end).copy()
    parent = np.empty(n, np.int32)
    depth = np.empty(n, np.int16)
    src = np.empty(2 * n, np.int64)
    dst = np.empty(2 * n, np.int64)
    owner = np.empty(2 * n, np.int32)
    overlaps = _I64(0)
    m = _lane_nesting(n, _p(lane), _p(start), _p(end), int(tol), _p(parent), _p(depth), _p(src), _p(dst),
                      _p(owner), ctypes.addressof(overlaps))
    return parent, depth, end, overlaps.value, src[:m], dst[:m], owner[:m]


def csr(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Counting sort: ``(indptr int64[n+1], order int64[E])`` grouping edges by ``keys``, stable."""
    keys = _i64(keys)
    indptr = np.empty(n + 1, np.int64)
    order = np.empty(len(keys), np.int64)
    _csr(len(keys), _p(keys), n, _p(indptr), _p(order))
    return indptr, order


def topological_order(n: int, in_ptr: np.ndarray, dst: np.ndarray, out_ptr: np.ndarray,
                      out_order: np.ndarray) -> np.ndarray:
    """Kahn's algorithm over the edges of the CSRs; returns fewer than ``n`` nodes on a cycle."""
    order = np.empty(n, np.int64)
    in_ptr, dst, out_ptr, out_order = map(_i64, (in_ptr, dst, out_ptr, out_order))
    k = _topo(n, _p(in_ptr), _p(dst), _p(out_ptr), _p(out_order), _p(order))
    return order[:k]


def longest_path(order: np.ndarray, src: np.ndarray, weight: np.ndarray, in_ptr: np.ndarray,
                 in_order: np.ndarray, dist0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Longest distance to every node from any source, and the edge that gives it.

    Pulls over in-edges in ``in_order``, skipping edges of negative weight (absent); on ties
    the earlier edge wins. Returns ``(dist int64[n], pred_edge int64[n])``; sources have dist
    0, pred -1. Only the nodes of ``order`` are computed: the others keep ``dist0`` (default 0).
    """
    n = len(in_ptr) - 1
    dist = np.zeros(n, np.int64) if dist0 is None else _i64(dist0).copy()
    pred = np.full(n, -1, np.int64)
    order, src, weight, in_ptr, in_order = map(_i64, (order, src, weight, in_ptr, in_order))
    _longest(len(order), _p(order), _p(src), _p(weight), _p(in_ptr), _p(in_order), _p(dist), _p(pred))
    return dist, pred


def latest_finish(order: np.ndarray, dst: np.ndarray, weight: np.ndarray, out_ptr: np.ndarray,
                  out_order: np.ndarray, deadline: np.ndarray) -> np.ndarray:
    """Latest time each node may reach without delaying any deadline; edges with weight < 0 are ignored."""
    lf = _i64(deadline).copy()
    order, dst, weight, out_ptr, out_order = map(_i64, (order, dst, weight, out_ptr, out_order))
    _latest(len(order), _p(order), _p(dst), _p(weight), _p(out_ptr), _p(out_order), _p(lf))
    return lf


def walk_back(pred: np.ndarray, src: np.ndarray, t: np.ndarray, sink: int, stop: int) -> np.ndarray:
    """Edges of the path ending at ``sink``, in time order, until a point at or before ``stop``."""
    out = np.empty(len(pred), np.int64)
    pred, src, t = _i64(pred), _i64(src), _i64(t)
    m = _walk(_p(pred), _p(src), _p(t), int(sink), int(stop), _p(out))
    return out[:m][::-1].copy()


def mark_back(pred: np.ndarray, src: np.ndarray, sinks: np.ndarray) -> np.ndarray:
    """bool[n]: the points on the paths back from ``sinks`` (through ``pred`` edges and their ``src``)."""
    seen = np.zeros(len(pred), np.uint8)
    pred, src, sinks = _i64(pred), _i64(src), _i64(sinks)
    _mark(_p(pred), _p(src), _p(sinks), len(sinks), _p(seen))
    return seen.view(bool)


def select_binding(t: np.ndarray, src: np.ndarray, mode: np.ndarray, minlag: np.ndarray, in_ptr: np.ndarray,
                   in_order: np.ndarray, wake_tol: int, contra_tol: int):  # type: ignore[no-untyped-def]
    """Chooses, for every point, the in-edge that released it and weighs every edge.

    The binding edge gets the observed delay t(dst) - t(src); every other edge
    its minimum lag, capped at the observed delay, so that a longest-path pass
    reproduces the observed times and follows the binding edges. Edges the
    data contradict (their source after their target) get weight -1 (dropped).
    Reorders ``in_order`` in place so that each point's binding edge comes first.
    Returns ``(weight int64[E], binding int64[P], late bool[P], contradicted)``;
    ``late`` marks threads that ran more than ``wake_tol`` after their release.
    """
    n = len(in_ptr) - 1
    assert in_order.dtype == np.int64 and in_order.flags.c_contiguous  # reordered in place
    t, src, minlag, in_ptr = map(_i64, (t, src, minlag, in_ptr))
    mode = np.ascontiguousarray(mode, dtype=np.int8)
    weight = np.empty(len(src), np.int64)
    binding = np.empty(n, np.int64)
    late = np.empty(n, np.uint8)
    contradicted = _select(n, _p(t), _p(src), _p(mode), _p(minlag), _p(in_ptr), _p(in_order), int(wake_tol),
                           int(contra_tol), _p(weight), _p(binding), _p(late))
    return weight, binding, late.view(bool), contradicted


def boundary_paths(order: np.ndarray, src: np.ndarray, weight: np.ndarray, in_ptr: np.ndarray, in_order: np.ndarray,
                   boundary: np.ndarray, n_boundary: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The longest path between every two boundary points (``boundary[v]`` >= 0 names one) that runs through
    no other, for every such pair joined by one: ``(from, to, distance)``, int64 each, by ``to`` in
    ``order``. Edges of negative weight are absent."""
    n = len(in_ptr) - 1
    order, src, weight, in_ptr, in_order, boundary = map(_i64, (order, src, weight, in_ptr, in_order, boundary))
    lab_ptr, lab_len = np.zeros(n, np.int64), np.zeros(n, np.int64)
    best, touched = np.full(n_boundary, np.iinfo(np.int64).min, np.int64), np.empty(n_boundary, np.int64)
    pool, rows = 4 * n + 16, 4 * n_boundary + 16
    while True:  # the labels' and rows' sizes are known once written: grow and go again
        p_from, p_d = np.empty(pool, np.int64), np.empty(pool, np.int64)
        o_from, o_to, o_d = (np.empty(rows, np.int64) for _ in range(3))
        m = _boundary(len(order), _p(order), _p(src), _p(weight), _p(in_ptr), _p(in_order), _p(boundary),
                      _p(lab_ptr), _p(lab_len), _p(p_from), _p(p_d), pool, _p(best), _p(touched), _p(o_from),
                      _p(o_to), _p(o_d), rows)
        if m >= 0:
            return o_from[:m].copy(), o_to[:m].copy(), o_d[:m].copy()
        best.fill(np.iinfo(np.int64).min)
        pool, rows = 2 * pool, 2 * rows
