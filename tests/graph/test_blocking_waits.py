"""Blocking runtime calls in traces without ``cuda_sync`` events (PyTorch before 2.3, ROCm): a call that
lasts until the GPU work before it ends is a wait, with a sync edge from that work.

Times are µs, hand-built after the calls measured in the public H100/MI300 traces
(wild/tracelens): a pageable D2H copy ends 4-6 µs before its call returns, a pinned one 4 µs after
(the call does not wait), and on MI300 a synchronous ``hipMemcpyWithStream``'s copy ends 1.2 µs after
its call returns (the two clocks are skewed by more than the copy takes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.types import Category, NodeKind, Role
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import kernel, op, runtime, step, write

_KERNEL_END = 520.0


def _job(tmp_path: Path, call: str, call_end: float, copy: tuple[float, float] | None,
         launcher: str = "cudaLaunchKernel") -> Analysis:
    """A step whose 500 µs kernel is followed by ``call`` (started at 30 µs), then a CPU op."""
    events = [step(1, 0, 600), op("aten::mm", 5, 20), runtime(launcher, 10, 5, corr=1),
              kernel("gemm", 20, _KERNEL_END - 20, corr=1), op("aten::_local_scalar_dense", 28, call_end - 27),
              runtime(call, 30, call_end - 30, corr=2), op("aten::add", call_end + 5, 10)]
    if copy is not None:
        events.append(kernel("Memcpy DtoH (Device -> Pageable)", copy[0], copy[1] - copy[0], corr=2,
                             cat="gpu_memcpy"))
    return analyze(read_trace(write(tmp_path / "t.json.gz", events)))


def _wait(a: Analysis) -> tuple[int, int, np.ndarray]:
    """The step's sync_wait and gpu_compute (ns), and the kinds of the nodes its critical path went
    through before the waiting call (which must be on it)."""
    (r,) = a.steps
    g = a.graph
    call = int(np.flatnonzero(g.kind == NodeKind.RUNTIME)[-1])
    upto = int(np.flatnonzero(r.path_node == call)[0])
    before = r.path_node[:upto]
    return r.breakdown_ns[Category.SYNC_WAIT], r.breakdown_ns[Category.GPU_COMPUTE], g.kind[before[before >= 0]]


def test_blocking_copy_waits_for_the_kernels_before_it(tmp_path: Path) -> None:
    # .item(): the tiny D2H copy queues behind the kernel, the call returns 2 µs after it
    a = _job(tmp_path, "cudaMemcpyAsync", _KERNEL_END + 3, (_KERNEL_END, _KERNEL_END + 1))
    wait, gpu, before = _wait(a)
    assert wait == 2_000 and gpu == 501_000  # the host waited through the kernel and the copy
    assert NodeKind.KERNEL in before and before[-1] == NodeKind.MEMCPY


def test_stream_sync_without_sync_event_waits_for_the_stream(tmp_path: Path) -> None:
    a = _job(tmp_path, "cudaStreamSynchronize", _KERNEL_END + 4, None)
    wait, gpu, before = _wait(a)
    assert wait == 4_000 and gpu == 500_000 and before[-1] == NodeKind.KERNEL


def test_synchronous_hip_copy_waits_despite_skewed_clocks(tmp_path: Path) -> None:
    # MI300: the copy ends 1.2 µs after its (synchronous) call returns
    a = _job(tmp_path, "hipMemcpyWithStream", _KERNEL_END + 1.8, (_KERNEL_END + 0.2, _KERNEL_END + 3),
             launcher="hipLaunchKernel")
    wait, gpu, before = _wait(a)
    assert wait > 0 and gpu >= 500_000 and before[-1] in (NodeKind.KERNEL, NodeKind.MEMCPY)
    (r,) = a.steps
    assert r.breakdown_ns[Category.LAUNCH_OVERHEAD] < 20_000  # not the 490 µs wait


def test_pinned_copy_that_returns_at_once_is_no_wait(tmp_path: Path) -> None:
    # non_blocking=True into pinned memory: the call returns long before its copy runs
    a = _job(tmp_path, "cudaMemcpyAsync", 40, (_KERNEL_END, _KERNEL_END + 2))
    (r,) = a.steps
    assert r.breakdown_ns[Category.SYNC_WAIT] == 0
    g = a.graph
    assert not (g.role[g.kind == NodeKind.RUNTIME] == Role.SYNC).any()
    assert r.breakdown_ns[Category.LAUNCH_OVERHEAD] > 0


