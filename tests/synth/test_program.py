"""Tests for synth/program.py: the node graph, collectives and noise streams."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.synth.program import Dep, Draws, Graph, Kind, Lane, hash_noise


def test_graph_freezes_nodes_and_dependencies() -> None:
    g = Graph()
    a = g.add(0, Lane.MAIN, Kind.GAP, -1, 100, 0)
    b = g.add(0, 7, Kind.KERNEL, 3, 200, 0, kernel_class=0, launcher=a)
    g.dep(b, a, Dep.START_AFTER_START, 50)
    p = g.freeze()
    assert len(p) == 2 and p.kind.tolist() == [Kind.GAP, Kind.KERNEL] and p.launcher.tolist() == [-1, 0]
    assert (p.dep_dst.tolist(), p.dep_src.tolist(), p.dep_type.tolist(), p.dep_lag.tolist()) == ([1], [0], [1], [50])


def test_collectives_close_into_one_transfer_node() -> None:
    g = Graph()
    members = []
    for rank in (0, 1):
        arrival = g.add(rank, Lane.VIRTUAL, Kind.ARRIVAL, 0, 0, 0)
        kernel = g.add(rank, 20, Kind.COMM, 0, 0, 0)
        g.join((1, 0), arrival, kernel, 1000 + rank)
        members.append((arrival, kernel))
    g.close_collectives([4, 2])
    p = g.freeze()
    coll = int(np.flatnonzero(p.kind == Kind.COLL)[0])
    assert p.dur_ns[coll] == 1001  # the slowest member's cost
    assert p.coll_of[[k for _, k in members]].tolist() == [coll, coll]
    assert sorted(zip(p.dep_type.tolist(), p.dep_src.tolist())) == sorted(
        [(Dep.START_AFTER_END, a) for a, _ in members] + [(Dep.END_AFTER_END, coll)] * 2)


def test_a_collective_missing_a_member_is_an_internal_error() -> None:
    g = Graph()
    g.join((0, 0), g.add(0, Lane.VIRTUAL, Kind.ARRIVAL, 0, 0, 0), g.add(0, 20, Kind.COMM, 0, 0, 0), 10)
    with pytest.raises(AssertionError):
        g.close_collectives([2])


def test_noise_is_seeded_and_centred_on_one() -> None:
    first = [Draws((1, 2, 3), 0.05).next() for _ in range(3)]
    d = Draws((1, 2, 3), 0.05)
    again = [d.next() for _ in range(3)]
    assert first[0] == again[0] and len(set(again)) == 3
    many = np.array([d.next() for _ in range(20_000)])
    assert many.mean() == pytest.approx(1.0, abs=0.003) and many.std() == pytest.approx(0.05, rel=0.1)
    assert Draws((0,), 0.0).next() == 1.0
    hashed = np.array([hash_noise(0.02, 7, k) for k in range(20_000)])
    assert hashed.mean() == pytest.approx(1.0, abs=0.002) and hashed.std() == pytest.approx(0.02, rel=0.1)
    assert hash_noise(0.02, 7, 1) == hash_noise(0.02, 7, 1) != hash_noise(0.02, 7, 2)
