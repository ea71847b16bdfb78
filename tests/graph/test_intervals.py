from __future__ import annotations

import numpy as np

from bottleneck_oracle.graph.intervals import covered, merged


def test_merged_joins_overlapping_intervals_in_order() -> None:
    s, e = merged(np.array([5, 0, 6, 20]), np.array([8, 4, 7, 25]))
    assert s.tolist() == [0, 5, 20] and e.tolist() == [4, 8, 25]
    empty = merged(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert len(empty[0]) == len(empty[1]) == 0


def test_covered_counts_the_union_inside_each_window() -> None:
    s, e = merged(np.array([0, 5, 6, 20]), np.array([4, 8, 7, 25]))
    lo = np.array([-1, 2, 4, 6, 10, 0])
    hi = np.array([2, 4, 6, 22, 30, 30])
    assert covered(s, e, lo, hi).tolist() == [2, 2, 1, 4, 5, 12]
    assert covered(np.zeros(0), np.zeros(0), lo, hi).tolist() == [0] * 6
