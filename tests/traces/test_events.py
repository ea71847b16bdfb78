from __future__ import annotations

import numpy as np

from bottleneck_oracle.traces import EventTable, read_trace
from tests.conftest import REAL


def test_take_and_concat_round_trip() -> None:
    ev = read_trace(REAL / "hta" / "cp_cuda_event_sync").events
    half = len(ev) // 2
    joined = EventTable.concat([ev.take(np.arange(half)), ev.take(np.arange(half, len(ev)))])
    assert len(joined) == len(ev)
    assert np.array_equal(joined.start_ns, ev.start_ns) and np.array_equal(joined.end_ns, ev.end_ns)


def test_rank_info_lookup() -> None:
    trace = read_trace(REAL / "param" / "dlrm_8rank_kineto")
    assert trace.rank_info(5).path.name.startswith("worker5")
    assert trace.rank_info(5).world_size == 8 and trace.rank_info(5).rank_source == "distributedInfo"
