"""The weighted point graph replays every real trace exactly and its binding edges are its path."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.graph import build_graph
from bottleneck_oracle.graph.critical_path import check_replay
from bottleneck_oracle.graph.points import LANE, SOURCE, build_point_graph
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA, REAL


@pytest.mark.parametrize("folder", ["hta/cp_alexnet", "hta/nccl_parser_config", "hta/ns_resolution",
                                    "hta/trace_diff_control", "param/dlrm_8rank_kineto"])
def test_replay_reproduces_every_point_time(folder: str) -> None:
    pg = build_point_graph(build_graph(read_trace(REAL / folder, partial=True)))
    dist, pred = check_replay(pg)
    assert np.array_equal(dist, pg.t - pg.t[-1])
    # the longest-path predecessor of every point is the edge that released it
    has = pg.binding >= 0
    assert np.array_equal(pred[has], pg.binding[has])
    assert (pg.weight < 0).sum() == pg.contradicted  # contradicted edges stay out of the index
    assert pg.origin[pg.binding[has]].min() >= SOURCE


def test_every_point_but_the_source_has_one_binding_edge() -> None:
    pg = build_point_graph(build_graph(read_trace(REAL / "hta" / "cp_cuda_event_sync")))
    assert (pg.binding[:-1] >= 0).all() and pg.binding[-1] == -1
    lane_edges = pg.origin == LANE
    assert lane_edges.any() and (pg.dst[pg.binding[:-1]] == np.arange(len(pg.t) - 1)).all()


def test_an_eager_send_done_before_its_receive_was_posted_makes_no_cycle() -> None:
    # a real CPU pipeline capture at 8 micro-batches: one gloo send returned before its peer posted the
    # receive (tests/graph/test_build.py); its wait looped through the instance's arrival point
    pg = build_point_graph(build_graph(read_trace(DATA / "pipeline_eager_send")))  # raised GraphError
    assert len(pg.index.order) == len(pg.t)
