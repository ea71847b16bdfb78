"""Tests for synth/rank_builder.py: launches, stream waits, blocking collectives, syncs, hand-offs."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.job import Job, Tuning
from bottleneck_oracle.synth.model import Op
from bottleneck_oracle.synth.ops import copy_template
from bottleneck_oracle.synth.program import Graph, Kind, Lane
from bottleneck_oracle.synth.rank_builder import HANDOFF_NS, RankBuilder
from bottleneck_oracle.synth.schedule import solve, topological_order
from bottleneck_oracle.synth.topology import COMPUTE_STREAM


def _two_ranks() -> tuple[Graph, Job, list[RankBuilder], Op]:
    job = Job(SynthConfig(model="1b", tp=2, noise=0.0), Tuning())
    graph = Graph()
    builders = [RankBuilder(graph, job, r) for r in range(2)]
    for b in builders:
        b.begin_step(0)
    qkv = next(o for o in job.layer_fwd if isinstance(o, Op) and o.key == "qkv")
    return graph, job, builders, qkv


def _solve(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    p = graph.freeze()
    return solve(p, topological_order(p), p.dur_ns)


def test_blocking_all_reduce_couples_ranks_and_the_compute_stream() -> None:
    graph, job, (b0, b1), qkv = _two_ranks()
    kernels = {}
    for b, delay in ((b0, 0), (b1, 2_000_000)):  # rank 1 arrives 2 ms late
        b.gap(Lane.MAIN, delay)
        before = b.compute(Lane.MAIN, job.op(qkv, False), (qkv.leaves[0].kernel,))
        comm = b.collective(Lane.MAIN, "allreduce", job.topology.tp[b.rank], 1 << 20, blocking=True)
        after = b.compute(Lane.MAIN, job.op(qkv, False), (qkv.leaves[0].kernel,))
        kernels[b.rank] = (before + 1, comm, after + 1)  # a compute node's kernel follows it
    graph.close_collectives([len(g.ranks) for g in job.topology.groups])
    start, end = _solve(graph)
    k0, k1 = kernels[0], kernels[1]
    assert start[k0[1]] >= end[k0[0]] and start[k1[1]] >= end[k1[0]]  # NCCL waits for compute
    assert end[k0[1]] == end[k1[1]] > start[k1[1]] > start[k0[1]] + 1_900_000  # early rank waits inside
    assert start[k0[2]] >= end[k0[1]] and start[k1[2]] >= end[k1[1]]  # compute waits for the all-reduce


def test_kernel_starts_after_its_launch_call() -> None:
    graph, job, (b0, _), qkv = _two_ranks()
    cpu = b0.compute(Lane.MAIN, job.op(qkv, False), (qkv.leaves[0].kernel,))
    t = job.templates[job.op(qkv, False)]
    start, _ = _solve(graph)
    assert start[cpu + 1] - start[cpu] == t.launch_end_ns[0] + job.latency_ns
    assert graph.cols[1][cpu + 1] == COMPUTE_STREAM


def test_item_sync_waits_for_the_gpu_and_hand_off_wakes_the_other_thread() -> None:
    graph, job, (b0, _), qkv = _two_ranks()
    big = b0.compute(Lane.MAIN, job.op(qkv, False), (qkv.leaves[0].kernel,))
    item = job.template(("item",), lambda: copy_template(("aten::item", "aten::_local_scalar_dense"), job.hw, True))
    sync = b0.copy(Lane.MAIN, item, "Memcpy DtoH (Device -> Pageable)", 4)
    b0.hand_off(sync, Lane.AUTOGRAD)
    woken = b0.gap(Lane.AUTOGRAD, 10)
    start, end = _solve(graph)
    assert end[sync] > end[big + 1] > start[sync] + job.templates[item].dur_ns  # blocked until the GPU drained
    assert end[sync] >= end[sync + 1]  # ... and until its copy landed
    assert start[woken] == end[sync] + HANDOFF_NS
    assert graph.cols[2][sync + 1] == Kind.COPY
