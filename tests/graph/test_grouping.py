"""positions_by: one sort gives, for every key, exactly what a scan for that key gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bottleneck_oracle.graph.grouping import positions_by


@given(arrays(np.int32, st.integers(0, 200), elements=st.integers(-3, 6)))
def test_each_key_gets_the_positions_a_scan_finds_in_order(keys: np.ndarray) -> None:
    groups = positions_by(keys)
    assert sorted(groups) == np.unique(keys).tolist()
    for key, at in groups.items():
        assert np.array_equal(at, np.flatnonzero(keys == key))


def test_no_keys_no_groups() -> None:
    assert positions_by(np.zeros(0, dtype=np.int64)) == {}
