from __future__ import annotations

import numpy as np

from bottleneck_oracle.graph import EdgeType, build_graph
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL


def test_node_arrays_are_lane_contiguous_and_time_sorted() -> None:
    g = build_graph(read_trace(REAL / "hta" / "nccl_parser_config"))
    assert (np.diff(g.lane) >= 0).all()
    same = g.lane[1:] == g.lane[:-1]
    assert (np.diff(g.start_ns)[same] >= 0).all()
    assert (g.end_ns >= g.start_ns).all()
    assert g.step.min() >= -1 and set(np.unique(g.step).tolist()) <= {-1, 4, 5, 6}


def test_edges_of_and_nesting_agree() -> None:
    g = build_graph(read_trace(REAL / "hta" / "cp_cuda_event_sync"))
    src, dst = g.edges_of(EdgeType.NEST)
    assert np.array_equal(np.sort(dst), np.flatnonzero(g.parent >= 0))
    assert (g.parent[dst] == src).all() and (g.depth[dst] == g.depth[src] + 1).all()
