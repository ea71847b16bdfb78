"""Tests for synth/model.py: shapes and roofline costs of one layer, checked by hand."""

from __future__ import annotations

import pytest

from bottleneck_oracle.synth.hardware import HARDWARE
from bottleneck_oracle.synth.model import (
    MODELS,
    Op,
    Shard,
    TpAllReduce,
    embedding_ops,
    gemm,
    head_ops,
    layer_backward,
    layer_forward,
    layer_params,
    optimizer_ops,
    roofline_s,
)
from bottleneck_oracle.vocabulary import KernelClass

SEVEN_B = MODELS["7b"]
FULL = Shard(batch=1, seq=4096, tp=1)


def _ops(ops: tuple[Op | TpAllReduce, ...]) -> dict[str, Op]:
    return {op.key: op for op in ops if isinstance(op, Op)}


def test_named_models_exist() -> None:
    assert {"tiny", "gpt2-small", "1b", "7b", "13b"} <= set(MODELS)
    assert (SEVEN_B.layers, SEVEN_B.d_model, SEVEN_B.heads, SEVEN_B.ffn) == (32, 4096, 32, 11008)


def test_qkv_and_mlp_gemm_flops_are_2mnk() -> None:
    fwd = _ops(layer_forward(SEVEN_B, FULL, "sm90"))
    qkv = fwd["qkv"].leaves[0].kernel
    assert qkv.flops == 2 * 4096 * 12288 * 4096 == 412_316_860_416
    assert qkv.nbytes == 2 * (4096 * 4096 + 4096 * 12288 + 4096 * 12288) == 234_881_024
    fc1 = fwd["fc1"].leaves[0].kernel  # gate and up projections fused: n = 2 · ffn
    assert fc1.flops == 2 * 4096 * 22016 * 4096 == 738_734_374_912
    assert fwd["fc2"].leaves[0].kernel.flops == 2 * 4096 * 4096 * 11008 == 369_367_187_456
    assert fwd["qkv"].leaves[0].names == ("aten::linear", "aten::addmm")


def test_tensor_parallel_shards_divide_the_gemms() -> None:
    fwd = _ops(layer_forward(SEVEN_B, Shard(1, 4096, 4), "sm90"))
    assert fwd["qkv"].leaves[0].kernel.flops == 412_316_860_416 / 4
    assert fwd["proj"].leaves[0].kernel.flops == 2 * 4096 * 4096 * 1024
    reduces = [op for op in layer_forward(SEVEN_B, Shard(1, 4096, 4), "sm90") if isinstance(op, TpAllReduce)]
    assert [r.nelems for r in reduces] == [4096 * 4096] * 2  # after attention and after the MLP
    assert not any(isinstance(op, TpAllReduce) for op in layer_forward(SEVEN_B, FULL, "sm90"))


def test_backward_gemms_cost_twice_the_forward() -> None:
    fwd = _ops(layer_forward(SEVEN_B, FULL, "sm90"))
    bwd = _ops(layer_backward(SEVEN_B, FULL, "sm90"))
    for key in ("qkv", "proj", "fc1", "fc2"):
        dgrad, wgrad = (leaf.kernel.flops for leaf in bwd[key].leaves)
        assert dgrad == wgrad == fwd[key].leaves[0].kernel.flops
        assert bwd[key].wrappers == ("autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0")
    assert bwd["attn"].leaves[0].kernel.flops == 2.5 * fwd["attn"].leaves[0].kernel.flops
    assert fwd["attn"].leaves[0].kernel.flops == 2 * 4096 * 4096 * 4096  # causal: half of 4·b·s²·h


def test_roofline_takes_the_binding_limit() -> None:
    hw = HARDWARE["H100"]
    qkv = gemm("g", 4096, 12288, 4096)
    assert roofline_s(qkv.flops, qkv.nbytes, hw, 0.5) == pytest.approx(412_316_860_416 / (989e12 * 0.5))
    assert roofline_s(0.0, 335e6, hw, 0.5) == pytest.approx(1e-4)  # memory-bound: bytes / HBM
    assert roofline_s(1.0, 1.0, hw, 0.5) == hw.min_kernel_s


def test_layer_gradients_and_their_all_reduce_bytes() -> None:
    params = layer_params(SEVEN_B, 1)
    assert params == 4 * 4096**2 + 3 * 4096 * 11008 + 4 * 4096 == 202_391_552
    assert 2 * params == 404_783_104  # bf16 bytes one layer adds to the data-parallel all-reduce
    assert layer_params(SEVEN_B, 4) == (4 * 4096**2 + 3 * 4096 * 11008) // 4 + 4 * 4096


def test_embedding_head_and_padded_vocabulary() -> None:
    gpt2 = MODELS["gpt2-small"]
    assert gpt2.padded_vocab(1) == 50304 and gpt2.padded_vocab(4) == 50688
    _, _, embed_params = embedding_ops(gpt2, Shard(8, 1024, 2))
    assert embed_params == 50432 // 2 * 768
    forward, backward, _ = head_ops(gpt2, Shard(8, 1024, 1), "sm80")
    assert [op.key for op in forward] == ["final_ln", "lm_head", "loss"]
    assert forward[1].leaves[0].kernel.flops == 2 * 8192 * 50304 * 768
    assert backward[0].wrappers[-1] == "NllLossBackward0"


def test_optimizer_ops_stream_every_parameter() -> None:
    ops = optimizer_ops(params=1_000_000, tensors=100)
    assert all(kernel.kernel_class == KernelClass.OPTIMIZER and launches == 3 for _, kernel, launches in ops)
    total = sum(kernel.nbytes * launches for _, kernel, launches in ops)
    assert total == pytest.approx(4 * 1_000_000 * 21)  # 21 fp32 tensor passes per parameter (AdamW)
    assert {name for name, _, _ in ops} >= {"aten::_foreach_lerp_", "aten::_foreach_addcdiv_"}
