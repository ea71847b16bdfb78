"""Tests for synth/job.py: shared tables, interned kernels and templates, parameters per chunk."""

from __future__ import annotations

import pytest

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.job import Job, Tuning
from bottleneck_oracle.synth.model import MODELS, Op, layer_params, roofline_s


def test_kernels_and_templates_are_interned() -> None:
    job = Job(SynthConfig(model="1b", tp=2), Tuning())
    op = next(o for o in job.layer_fwd if isinstance(o, Op) and o.key == "qkv")
    first = job.kernel(op.leaves[0].kernel)
    assert job.kernel(op.leaves[0].kernel) == first and len(job.kernels) == 1
    expected = roofline_s(op.leaves[0].kernel.flops, op.leaves[0].kernel.nbytes, job.hw, 0.5) * 1e9
    assert job.kernel_ns[first] == pytest.approx(expected)
    assert job.op(op, False) == job.op(op, False) != job.op(op, True)


def test_tuning_divides_kernel_time_by_class() -> None:
    config = SynthConfig(model="1b")
    plain, fast = Job(config, Tuning()), Job(config, Tuning(kernel_speedup=(("gemm", 4.0),)))
    op = next(o for o in plain.layer_fwd if isinstance(o, Op) and o.key == "qkv")
    fast_op = next(o for o in fast.layer_fwd if isinstance(o, Op) and o.key == "qkv")
    base = plain.kernel_ns[plain.kernel(op.leaves[0].kernel)]
    quick = fast.kernel_ns[fast.kernel(fast_op.leaves[0].kernel)]
    assert quick == pytest.approx(base / 4)
    assert Tuning(collective_speedup=(("allreduce", 2.0),)).collective("allreduce") == 2.0
    assert Tuning().collective("sendrecv") == 1.0 and Tuning().kernel("gemm") == 1.0


def test_chunk_parameters_split_the_model_over_stages() -> None:
    job = Job(SynthConfig(model="7b", tp=4, pp=2, microbatches=2), Tuning())
    per_layer = layer_params(MODELS["7b"], 4)
    first, last = job.chunk_params(0, 0), job.chunk_params(1, 0)
    assert first == 16 * per_layer + job.embed_params and last == 16 * per_layer + job.head_params
    assert job.activation_nelems == 4096 * 4096


def test_distributed_optimizer_updates_a_shard() -> None:
    plain = Job(SynthConfig(model="1b", dp=4), Tuning()).optimizer_ops[0]
    sharded = Job(SynthConfig(model="1b", dp=4, distributed_optimizer=True), Tuning()).optimizer_ops[0]
    assert sharded[0][1].nbytes == pytest.approx(plain[0][1].nbytes / 4, rel=1e-6)
