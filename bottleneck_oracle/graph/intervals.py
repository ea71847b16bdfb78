"""Time intervals: their union, and how much of a window the union covers."""

from __future__ import annotations

import numpy as np

__all__ = ["merged", "covered"]


def merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as disjoint sorted intervals."""
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > e[:-1]
    idx = np.flatnonzero(new)
    last = np.append(idx[1:], len(s)) - 1
    return s[idx], e[last]


def covered(s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each window [lo, hi), the time the disjoint sorted intervals (s, e) cover in it."""
    prefix = np.concatenate([[0], np.cumsum(e - s)])

    def upto(t: np.ndarray) -> np.ndarray:  # covered time before t
        k = np.searchsorted(s, t, side="right")  # intervals starting before t
        inside = np.where(k > 0, np.minimum(e[np.maximum(k - 1, 0)], t) - s[np.maximum(k - 1, 0)], 0)
        return prefix[np.maximum(k - 1, 0)] * (k > 0) + np.maximum(inside, 0)

    return upto(hi) - upto(lo) if len(s) else np.zeros(len(lo), dtype=np.int64)
