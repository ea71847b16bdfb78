"""Tests for synth/ops.py: CPU templates, their layout, launches and blocking calls."""

from __future__ import annotations

from bottleneck_oracle.synth.hardware import HARDWARE
from bottleneck_oracle.synth.model import (
    MODELS,
    Op,
    Shard,
    layer_backward,
    layer_forward,
)
from bottleneck_oracle.synth.ops import (
    COMM,
    COMPUTE,
    Autograd,
    Call,
    Frame,
    collective_template,
    copy_template,
    launches_template,
    make_template,
    op_template,
    sync_template,
)

HW = HARDWARE["H100"]


def _op(key: str, backward: bool = False) -> Op:
    ops = (layer_backward if backward else layer_forward)(MODELS["7b"], Shard(1, 4096, 1), "sm90")
    return next(op for op in ops if isinstance(op, Op) and op.key == key)


def test_layout_nests_children_inside_their_parent() -> None:
    inner = Frame("b", "cpu_op", 100, 50, (Frame("c", "cuda_runtime", post_ns=10, call=Call.LAUNCH),))
    t = make_template((Frame("a", "cpu_op", 1000, 500, (inner, inner)),))
    a, b1, c1, b2, c2 = t.spans
    assert (a.start_ns, a.dur_ns) == (0, 1000 + 160 + 500 + 160 + 500)  # pre, child, gap, child, post
    assert (b1.start_ns, c1.start_ns, b2.start_ns) == (1000, 1100, 1660)
    assert [s.depth for s in t.spans] == [0, 1, 2, 1, 2]
    assert t.launch_end_ns == (1110, 1770) and t.block_tail_ns == -1


def test_linear_forward_carries_shapes_and_a_sequence_number() -> None:
    t = op_template(_op("qkv"), HW, backward=False)
    names = [s.frame.name for s in t.spans]
    assert names == ["aten::linear", "aten::addmm", "cudaLaunchKernel"]
    assert t.spans[0].frame.autograd == Autograd.FORWARD
    assert dict(t.spans[0].frame.args)["Input Dims"] == [[1, 4096, 4096], [12288, 4096], [12288]]
    assert t.spans[2].dur_ns == round(HW.launch_cpu_s * 1e9) and len(t.launch_end_ns) == 1


def test_linear_backward_has_autograd_frames_and_two_gemms() -> None:
    t = op_template(_op("fc2", backward=True), HW, backward=True)
    names = [s.frame.name for s in t.spans]
    assert names[:2] == ["autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0"]
    assert names.count("aten::mm") == 2 and len(t.launch_end_ns) == 2
    assert t.spans[1].frame.autograd == Autograd.BACKWARD


def test_collective_template_records_waits_and_launches() -> None:
    t = collective_template("allreduce", HW, (), blocking=True)
    frames = [s.frame for s in t.spans]
    assert [f.name for f in frames[:3]] == ["c10d::allreduce_", "record_param_comms", "nccl:all_reduce"]
    calls = [(f.name, f.call, f.stream, f.wait_on) for f in frames if f.cat == "cuda_runtime"]
    assert calls == [
        ("cudaEventRecord", Call.RECORD, COMPUTE, COMPUTE),
        ("cudaStreamWaitEvent", Call.WAIT, COMM, COMPUTE),  # the comm stream waits for compute
        ("cudaLaunchKernelExC", Call.LAUNCH, COMM, COMPUTE),
        ("cudaEventRecord", Call.RECORD, COMM, COMPUTE),
        ("cudaStreamWaitEvent", Call.WAIT, COMPUTE, COMM),  # blocking: compute waits for comm
    ]
    assert len(collective_template("send", HW, (), blocking=False).spans) == 6


def test_item_template_blocks_after_its_copy() -> None:
    t = copy_template(("aten::item", "aten::_local_scalar_dense"), HW, sync=True)
    names = [s.frame.name for s in t.spans]
    assert names == ["aten::item", "aten::_local_scalar_dense", "cudaMemcpyAsync", "cudaStreamSynchronize"]
    assert t.blocks_stream and t.block_tail_ns > 0
    sync = t.spans[3]
    assert sync.holds_block and t.spans[0].holds_block and not t.spans[2].holds_block
    assert t.dur_ns - (sync.start_ns + sync.dur_ns) == t.block_tail_ns
    device = sync_template(HW)
    assert not device.blocks_stream and device.block_tail_ns == 0


def test_foreach_template_launches_each_kernel() -> None:
    t = launches_template("aten::_foreach_mul_", 3, HW)
    assert len(t.launch_end_ns) == 3 and t.launch_end_ns == tuple(sorted(t.launch_end_ns))
