"""The nodes of critical paths as the detectors read them: a graph's own, then the other ranks' a scan's task is
told of, numbered after them; pipeline transfers, their peers and checkpoint ranges."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.graph import CollectiveTable
from bottleneck_oracle.graph.path_nodes import ForeignNodes, GraphNodes, checkpoint_ranges, p2p_nodes, p2p_peers
from bottleneck_oracle.graph.types import NodeKind, Role
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA


def test_a_graph_s_nodes_are_its_own_and_the_foreign_ones_follow() -> None:
    g = analyze(read_trace(DATA / "pipeline_eager_send")).graph
    foreign = ForeignNodes(names=("gloo:send", "ProfilerStep#9"), kind=np.array([NodeKind.COMM, NodeKind.ANNOTATION], np.int8),
                           p2p=np.array([True, False]), role=np.array([Role.OTHER, Role.STEP], np.int8),
                           in_checkpoint=np.array([False, True]))
    nodes = GraphNodes(g, foreign)
    own = np.arange(len(g))
    assert [nodes.node_name(x) for x in (0, len(g) - 1)] == [g.node_name(0), g.node_name(len(g) - 1)]
    assert np.array_equal(nodes.kinds(own), g.kind) and np.array_equal(nodes.roles(own), g.role)
    assert np.array_equal(nodes.p2p(own), p2p_nodes(g))
    after = np.array([len(g), len(g) + 1])
    assert [nodes.node_name(x) for x in after.tolist()] == ["gloo:send", "ProfilerStep#9"]
    assert nodes.kinds(after).tolist() == [NodeKind.COMM, NodeKind.ANNOTATION]
    assert nodes.p2p(after).tolist() == [True, False] and nodes.in_checkpoint(after).tolist() == [False, True]
    assert nodes.roles(after).tolist() == [Role.OTHER, Role.STEP]


def test_pipeline_transfers_are_the_members_of_two_member_send_recv_instances() -> None:
    g = analyze(read_trace(DATA / "pipeline_eager_send")).graph
    p2p = p2p_nodes(g)
    assert p2p.any()
    table = g.collectives
    for node in np.flatnonzero(g.collective >= 0).tolist():
        c = int(g.collective[node])
        assert p2p[node] == (table.kind[c] == "sendrecv" and table.members[c] == 2)
    assert not p2p[g.collective < 0].any()


def test_a_checkpoint_range_flags_itself_and_what_runs_inside_it() -> None:
    g = analyze(read_trace(DATA / "gloo_checkpoint_stall")).graph
    inside = checkpoint_ranges(g)
    ranges = np.flatnonzero(g.role == Role.CHECKPOINT)
    assert len(ranges) and inside[ranges].all()
    children = np.flatnonzero(np.isin(g.parent, ranges))
    assert len(children) and inside[children].all()
    outside = np.flatnonzero(~inside)
    assert len(outside) and not np.isin(g.parent[outside], ranges).any()


def test_pipeline_peers_are_the_other_ranks_of_each_rank_s_transfers() -> None:
    table = CollectiveTable(kind=("sendrecv", "sendrecv", "allreduce", "sendrecv"), key=("seq",) * 4,
                            members=np.array([2, 2, 2, 3], np.int32), reliable=np.ones(4, bool))
    instance = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3, -1])
    rank = np.array([0, 1, 1, 2, 0, 3, 0, 4, 5, 6])
    # an all-reduce, a three-member send/recv and a node of no instance make no pipeline peers
    assert p2p_peers(instance, rank, table) == {0: [1], 1: [0, 2], 2: [1]}
