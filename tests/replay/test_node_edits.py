"""Tests for replay/node_edits.py: selectors on real and synthetic traces, and what a removal takes with it."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.replay.node_edits import removal, select_nodes
from bottleneck_oracle.graph.op_classes import op_class_mask
from bottleneck_oracle.graph.types import EdgeType, NodeKind, Role
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import Selector
from tests.conftest import REPO
from tests.whatif.cases import GPT2, fault, job

EXACT = (*GPT2, ("interference", 0.0))


def test_an_op_class_picks_the_kernels_on_a_gpu_trace_and_the_cpu_ops_on_a_cpu_one() -> None:
    _, a = job("", EXACT)
    gemm = select_nodes(a.graph, Selector(op="gemm"))
    assert gemm.any() and (a.graph.kind[gemm] == NodeKind.KERNEL).all()  # not the aten::mm that launched them
    cpu = analyze(read_trace(REPO / "examples" / "gpt_2rank"))
    mm = select_nodes(cpu.graph, Selector(op="gemm"))
    assert mm.any() and (cpu.graph.kind[mm] == NodeKind.CPU_OP).all()
    assert np.array_equal(mm, op_class_mask(cpu.graph, "gemm"))


def test_selectors_narrow_by_collective_rank_step_stream_and_name() -> None:
    _, a = job("", EXACT)
    g = a.graph
    allreduce = select_nodes(a.graph, Selector(op="allreduce"))
    assert allreduce.any() and (g.kind[allreduce] == NodeKind.COMM).all()
    narrow = select_nodes(a.graph, Selector(op="allreduce", ranks=(1,), steps=(2,)))
    assert narrow.any() and set(g.rank[narrow]) == {1} and set(g.step[narrow]) == {2}
    streams = np.unique(g.trace.lanes.stream[g.lane[allreduce]])
    on_stream = select_nodes(a.graph, Selector(streams=(int(streams[0]),)))
    assert on_stream.any() and (g.trace.lanes.stream[g.lane[on_stream]] == streams[0]).all()
    named = select_nodes(a.graph, Selector(kind="kernel", name="^sm90_xmma_gemm"))
    assert named.sum() == (gemm := select_nodes(a.graph, Selector(op="gemm"))).sum() and (named <= gemm).all()


def test_removing_syncs_takes_what_they_ran_launched_and_waited_for() -> None:
    _, a = fault("host_sync")
    g = a.graph
    item = np.array([s == "aten::item" for s in g.trace.strings])[g.name]
    seed = item & (g.step == 2) & (g.rank == 1)
    nodes, waits, callers = removal(a.graph, a.points, seed)
    assert seed.sum() > 600 and nodes[seed].all()
    assert (nodes & (g.role == Role.SYNC)).sum() == seed.sum()  # the sync call inside each .item()
    assert (nodes & (g.kind == NodeKind.MEMCPY)).sum() == seed.sum()  # the copy it launched and waited on
    assert waits.any() and (a.points.origin[waits] == EdgeType.SYNC).all()
    assert 0 < callers.sum() <= seed.sum() and not nodes[g.rank != 1].any()
