"""Tests for synth/topology.py: process groups, their names and NCCL streams."""

from __future__ import annotations

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.topology import COMPUTE_STREAM, build_topology


def test_groups_follow_megatron_rank_order() -> None:
    topo = build_topology(SynthConfig(model="1b", dp=2, tp=2, pp=2, microbatches=2))
    g = topo.groups
    assert (g[0].name, g[0].desc, g[0].ranks) == ("0", "default_pg", tuple(range(8)))
    assert [g[i].ranks for i in set(topo.tp)] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert sorted(g[i].ranks for i in set(topo.dp)) == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert [gr.name for gr in g] == [str(i) for i in range(len(g))]
    assert set(topo.forward) == {(0, 4), (1, 5), (2, 6), (3, 7)}
    assert set(topo.backward) == {(4, 0), (5, 1), (6, 2), (7, 3)}
    assert g[topo.forward[(0, 4)]].ranks_text == "[0, 4]"


def test_each_rank_has_one_stream_per_communicating_group() -> None:
    topo = build_topology(SynthConfig(model="1b", dp=2, tp=2, pp=2, microbatches=2))
    for rank, streams in enumerate(topo.streams):
        ids = list(streams.values())
        assert len(set(ids)) == len(ids) and COMPUTE_STREAM not in ids
        assert topo.tp[rank] in streams and topo.dp[rank] in streams
        assert all(rank in topo.groups[index].ranks for index in streams)
    assert len(topo.groups_of(0)) == 6  # world, tp, dp, pp, forward pair, backward pair


def test_interleaving_adds_the_wrap_around_pairs() -> None:
    topo = build_topology(SynthConfig(model="tiny", pp=2, microbatches=2, interleave=True))
    assert set(topo.forward) == {(0, 1), (1, 0)}
    assert len({topo.forward[(0, 1)], topo.forward[(1, 0)], topo.backward[(1, 0)], topo.backward[(0, 1)]}) == 4
