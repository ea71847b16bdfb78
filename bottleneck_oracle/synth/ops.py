"""CPU-side shapes of the ops a rank runs: nested frames (ops, annotations, runtime calls) and their times.

A ``Template`` is laid out once at scale 1; the simulation stretches it by the node's CPU
factor (noise, injected overhead) and, when it holds a blocking call, by the time the
call waited. The simulation reads where each launch ends; the writer emits every frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from bottleneck_oracle.synth.hardware import Hardware
from bottleneck_oracle.synth.model import Op

__all__ = [
    "Autograd", "Call", "Frame", "Span", "Template", "collective_template", "copy_template", "cpu_template",
    "launches_template", "make_template", "op_template", "stream_wait_template", "sync_template", "COMM", "COMPUTE",
]

COMPUTE, COMM = 0, 1  # stream slots of a frame: the compute stream, or the stream of the node's group
_GAP_NS = 500  # between sibling frames
_ATEN = (6_000, 2_000)  # (pre, post) ns of an outer aten op
_ATEN_INNER = (3_000, 1_200)
_WRAP = ((5_000, 3_000), (3_000, 1_000))  # evaluate_function, XBackward0
_RUNTIME_NS = {"cudaEventRecord": 2_500, "cudaStreamWaitEvent": 2_000, "cudaMemcpyAsync": 8_000,
               "cudaStreamSynchronize": 3_000, "cudaDeviceSynchronize": 4_000, "cudaLaunchKernelExC": 6_000}
_C10D = {
    "allreduce": ("c10d::allreduce_", "nccl:all_reduce"),
    "reducescatter": ("c10d::_reduce_scatter_base_", "nccl:_reduce_scatter_base"),
    "allgather": ("c10d::_allgather_base_", "nccl:_all_gather_base"),
    "send": ("c10d::send", "nccl:send"),
    "recv": ("c10d::recv_", "nccl:recv"),
}


class Call(IntEnum):
    """What a runtime-call frame does."""

    NONE = 0  # not a runtime call
    LAUNCH = 1  # launches the node's next GPU work item (a kernel)
    MEMCPY = 2  # launches the node's next GPU work item (a copy)
    RECORD = 3  # cudaEventRecord on ``stream``
    WAIT = 4  # cudaStreamWaitEvent: ``stream`` waits for the last record on ``wait_on``
    SYNC_STREAM = 5  # cudaStreamSynchronize on ``stream``: blocks
    SYNC_DEVICE = 6  # cudaDeviceSynchronize: blocks


class Autograd(IntEnum):
    """Autograd role of a cpu_op frame."""

    NONE = 0
    FORWARD = 1  # carries a sequence number and starts a fwdbwd flow
    BACKWARD = 2  # same sequence number, ends the flow, ``Fwd thread id`` 1


@dataclass(frozen=True, slots=True)
class Frame:
    """One op, annotation or runtime call and what it encloses."""

    name: str
    cat: str
    pre_ns: int = 0
    post_ns: int = 0
    children: tuple[Frame, ...] = ()
    call: Call = Call.NONE
    stream: int = COMPUTE
    wait_on: int = COMPUTE
    args: tuple[tuple[str, object], ...] = ()
    autograd: Autograd = Autograd.NONE


@dataclass(frozen=True, slots=True)
class Span:
    """A frame laid out: offset and duration at scale 1, and how a blocking wait moves it."""

    frame: Frame
    start_ns: int
    dur_ns: int
    depth: int
    holds_block: bool  # the blocking call or one of its ancestors: stretched by the wait
    after_block: bool  # starts after the blocking call returns: shifted by the wait


@dataclass(frozen=True, slots=True)
class Template:
    """Frames of one CPU node in emission (pre-)order.

    Attributes:
        spans: the frames laid out.
        dur_ns: the node's CPU time at scale 1.
        launch_end_ns: offset of the end of each LAUNCH/MEMCPY call, in order.
        block_tail_ns: time from the end of the blocking call to the node's end (-1: no blocking call).
        blocks_stream: the blocking call is a stream sync (else a device sync, or none).
    """

    spans: tuple[Span, ...]
    dur_ns: int
    launch_end_ns: tuple[int, ...]
    block_tail_ns: int
    blocks_stream: bool  # the blocking call waits for the compute stream only (else the device)


def _frame_dur(f: Frame) -> int:
    inner = sum(_frame_dur(c) for c in f.children) + _GAP_NS * max(len(f.children) - 1, 0)
    return f.pre_ns + inner + f.post_ns


def _lay_out(f: Frame, start: int, depth: int, out: list[tuple[Frame, int, int, int]]) -> int:
    dur = _frame_dur(f)
    out.append((f, start, dur, depth))
    t = start + f.pre_ns
    for c in f.children:
        t = _lay_out(c, t, depth + 1, out) + _GAP_NS
    return start + dur


def make_template(roots: tuple[Frame, ...]) -> Template:
    """Lays out top-level frames one after the other (with a short gap between them)."""
    laid: list[tuple[Frame, int, int, int]] = []
    t = 0
    for root in roots:
        t = _lay_out(root, t, 0, laid) + _GAP_NS
    total = t - _GAP_NS
    blocking = [i for i, (f, _, _, _) in enumerate(laid) if f.call in (Call.SYNC_STREAM, Call.SYNC_DEVICE)]
    assert len(blocking) <= 1, "a template holds at most one blocking call"
    b_end = laid[blocking[0]][1] + laid[blocking[0]][2] if blocking else -1
    spans = tuple(
        Span(f, s, d, depth, holds_block=bool(blocking) and s <= laid[blocking[0]][1] and s + d >= b_end,
             after_block=bool(blocking) and s >= b_end)
        for f, s, d, depth in laid
    )
    launches = tuple(s + d for f, s, d, _ in laid if f.call in (Call.LAUNCH, Call.MEMCPY))
    stream_sync = bool(blocking) and laid[blocking[0]][0].call == Call.SYNC_STREAM
    return Template(spans, total, launches, total - b_end if blocking else -1, stream_sync)


def _call(name: str, call: Call, hw: Hardware, stream: int = COMPUTE, wait_on: int = COMPUTE) -> Frame:
    dur = round(hw.launch_cpu_s * 1e9) if name == "cudaLaunchKernel" else _RUNTIME_NS[name]
    return Frame(name, "cuda_runtime", post_ns=dur, call=call, stream=stream, wait_on=wait_on)


def _dims_args(dims: tuple[tuple[int, ...], ...]) -> tuple[tuple[str, object], ...]:
    if not dims:
        return ()
    return (("Input Dims", [list(d) for d in dims]), ("Input type", ["c10::BFloat16"] * len(dims)))


def op_template(op: Op, hw: Hardware, backward: bool) -> Template:
    """A compute op: its wrappers (autograd frames) around leaf chains that each launch one kernel."""
    leaves = []
    for leaf in op.leaves:
        inner = _call("cudaLaunchKernel", Call.LAUNCH, hw)
        for depth, name in enumerate(reversed(leaf.names)):
            pre, post = _ATEN if depth == len(leaf.names) - 1 else _ATEN_INNER
            args = _dims_args(leaf.input_dims) if depth == len(leaf.names) - 1 else ()
            inner = Frame(name, "cpu_op", pre, post, (inner,), args=args)
        leaves.append(inner)
    mark = Autograd.BACKWARD if backward else Autograd.FORWARD
    if not op.wrappers:
        assert len(leaves) == 1, "an op without wrappers has one leaf chain"
        root = leaves[0]
        if op.autograd:
            root = Frame(root.name, root.cat, root.pre_ns, root.post_ns, root.children, args=root.args, autograd=mark)
        return make_template((root,))
    children: tuple[Frame, ...] = tuple(leaves)
    for depth, name in enumerate(reversed(op.wrappers)):
        pre, post = _WRAP[-1 - depth] if len(op.wrappers) == 2 else _ATEN
        tag = mark if op.autograd and depth == 0 else Autograd.NONE
        children = (Frame(name, "cpu_op", pre, post, children, autograd=tag),)
    return make_template(children)


def collective_template(kind: str, hw: Hardware, args: tuple[tuple[str, object], ...], blocking: bool) -> Template:
    """A c10d op: ``c10d::X`` ⊃ ``record_param_comms`` ⊃ ``nccl:X`` ⊃ record, stream wait, kernel launch.

    The comm stream first waits for the compute stream (ProcessGroupNCCL does so before every
    collective); a blocking op (``work.wait()``) then makes the compute stream wait for it.

    Args:
        kind: ``allreduce``, ``reducescatter``, ``allgather``, ``send`` or ``recv``.
        args: the ``record_param_comms`` args.
        blocking: add the compute stream's wait for the comm stream after the op.
    """
    c10d, nccl = _C10D[kind]
    inner = Frame(nccl, "user_annotation", 2_000, 1_500, (
        _call("cudaEventRecord", Call.RECORD, hw, stream=COMPUTE),
        _call("cudaStreamWaitEvent", Call.WAIT, hw, stream=COMM, wait_on=COMPUTE),
        _call("cudaLaunchKernelExC", Call.LAUNCH, hw, stream=COMM),
    ))
    record = Frame("record_param_comms", "cpu_op", 8_000, 3_000, (inner,), args=args)
    roots: tuple[Frame, ...] = (Frame(c10d, "cpu_op", 15_000, 5_000, (record,)),)
    if blocking:
        roots += (_call("cudaEventRecord", Call.RECORD, hw, stream=COMM),
                  _call("cudaStreamWaitEvent", Call.WAIT, hw, stream=COMPUTE, wait_on=COMM))
    return make_template(roots)


def copy_template(names: tuple[str, ...], hw: Hardware, sync: bool = False) -> Template:
    """``aten::to`` / ``aten::item`` style chain holding a ``cudaMemcpyAsync`` (and a blocking stream sync)."""
    calls: tuple[Frame, ...] = (_call("cudaMemcpyAsync", Call.MEMCPY, hw),)
    if sync:
        calls += (_call("cudaStreamSynchronize", Call.SYNC_STREAM, hw),)
    frame: Frame | None = None
    for depth, name in enumerate(reversed(names)):
        pre, post = _ATEN if depth == len(names) - 1 else _ATEN_INNER
        frame = Frame(name, "cpu_op", pre, post, calls if frame is None else (frame,))
    assert frame is not None
    return make_template((frame,))


def launches_template(name: str, count: int, hw: Hardware) -> Template:
    """One cpu_op launching ``count`` kernels (a foreach optimizer op)."""
    calls = tuple(_call("cudaLaunchKernel", Call.LAUNCH, hw) for _ in range(count))
    return make_template((Frame(name, "cpu_op", *_ATEN, calls),))


def stream_wait_template(hw: Hardware) -> Template:
    """``work.wait()`` on its own: the compute stream waits for the last work on the node's comm stream."""
    return make_template((_call("cudaEventRecord", Call.RECORD, hw, stream=COMM),
                          _call("cudaStreamWaitEvent", Call.WAIT, hw, stream=COMPUTE, wait_on=COMM)))


def sync_template(hw: Hardware) -> Template:
    """A bare ``cudaDeviceSynchronize`` (``torch.cuda.synchronize()``)."""
    return make_template((_call("cudaDeviceSynchronize", Call.SYNC_DEVICE, hw),))


def cpu_template(name: str, dur_ns: int) -> Template:
    """A cpu_op that launches nothing and takes ``dur_ns``."""
    return make_template((Frame(name, "cpu_op", dur_ns // 2, dur_ns - dur_ns // 2),))
