"""Tests for synth/training_step.py: what one step of one rank is made of."""

from __future__ import annotations

from collections import Counter

import numpy as np

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.program import Kind
from bottleneck_oracle.synth.training_step import build_program, host_sync_count
from bottleneck_oracle.truth.injection import parse_injection


def _annotations(config: SynthConfig) -> dict[int, Counter[str]]:
    p, _ = build_program(config)
    out: dict[int, Counter[str]] = {}
    for rank, _, name, _, _ in p.annotations:
        out.setdefault(rank, Counter())[p.names[name]] += 1
    return out


def test_every_rank_records_every_step_and_pass() -> None:
    config = SynthConfig(model="1b", dp=2, tp=2, pp=2, microbatches=3, steps=2, first_step=7)
    notes = _annotations(config)
    for rank in range(8):
        c = notes[rank]
        assert c["ProfilerStep#7"] == c["ProfilerStep#8"] == 1
        assert c["## forward ##"] == c["## backward ##"] == 6
        assert c["Optimizer.step#AdamW.step"] == 2
        assert c["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] == 2


def test_gradient_buckets_reduce_every_local_parameter() -> None:
    config = SynthConfig(model="gpt2-small", dp=2, microbatches=2, steps=1, bucket_mb=10)
    p, job = build_program(config)
    reduces = [info for info in p.comm_infos if info[0] == "allreduce" and info[1] == job.topology.dp[0]]
    per_rank = sum(n for kind, group, _, n, _ in p.comm_infos if group == job.topology.dp[0]) // 2
    assert per_rank == job.chunk_params(0, 0)
    assert len(reduces) // 2 > 1 and max(n for *_, n, _ in reduces) < job.chunk_params(0, 0)


def test_pipeline_sends_match_receives() -> None:
    config = SynthConfig(model="1b", pp=4, microbatches=4, steps=1)
    p, job = build_program(config)
    kinds = Counter((kind, group) for kind, group, *_ in p.comm_infos)
    for pair, group in {**job.topology.forward, **job.topology.backward}.items():
        assert kinds[("send", group)] == kinds[("recv", group)] == 4, pair


def test_host_sync_injection_adds_item_copies() -> None:
    config = SynthConfig(model="1b", steps=2, injections=(parse_injection("host_sync@2:0=3"),))
    p, _ = build_program(config)
    copies = [name for name, _ in p.copy_infos if name == "Memcpy DtoH (Device -> Pageable)"]
    assert host_sync_count(3) == 100
    assert len(copies) - 2 == host_sync_count(3)  # plus one loss.item() per step
    assert (p.kind == Kind.COPY).sum() == len(p.copy_infos)


def test_slow_compute_stretches_only_its_rank_and_step() -> None:
    config = SynthConfig(model="1b", dp=2, steps=2, noise=0.0, injections=(parse_injection("slow_compute@2:1=3x"),))
    p, _ = build_program(config)
    kernels = p.kind == Kind.KERNEL
    ref = p.dur_ns[kernels & (p.rank == 0) & (p.step == 1)]
    slow = p.dur_ns[kernels & (p.rank == 1) & (p.step == 1)]
    assert np.allclose(slow, 3 * ref, rtol=1e-6, atol=2)
    first_step = kernels & (p.step == 0)
    assert np.array_equal(p.dur_ns[first_step & (p.rank == 1)], p.dur_ns[first_step & (p.rank == 0)])
