"""Host waits no call names (``graph/host_waits.py``): a thread idle inside its step while the GPU drains
the work queued before the thread went idle, and woken as it drained, waited for that work.

Times are µs. The step launches a 2 ms kernel, then its thread runs no op (the old profiler recorded no
synchronize; a wait inside ``.item()``) until just after the kernel ends, then runs the optimizer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bottleneck_oracle.analysis import Analysis, analyze
from bottleneck_oracle.graph.types import Category, EdgeType, NodeKind
from bottleneck_oracle.replay.engine import Edit, replay_steps
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import kernel, op, runtime, step, write

_KERNEL = (20.0, 2000.0)  # start, duration


def _job(tmp_path: Path, resume: float, launches: int = 1) -> Analysis:
    """One step: ``launches`` launches of the kernel, an idle thread, and an op at ``resume``."""
    events = [step(1, 0, resume + 300), op("aten::mm", 5, 12)]
    for i in range(launches):
        events += [runtime("cudaLaunchKernel", 8 + i, 1, corr=1 + i),
                   kernel("gemm", _KERNEL[0] + i * _KERNEL[1], _KERNEL[1], corr=1 + i)]
    events.append(op("Optimizer.step#SGD.step", resume, 200))
    return analyze(read_trace(write(tmp_path / "t.json.gz", events)))


def _waits(a: Analysis) -> list[tuple[str, str]]:
    g, names = a.graph, a.graph.trace.strings
    s, d = g.edges_of(EdgeType.SYNC)
    return [(names[g.name[x]], names[g.name[y]]) for x, y in zip(s.tolist(), d.tolist())]


def test_a_thread_woken_as_the_queue_drained_waited_for_its_last_work(tmp_path: Path) -> None:
    end = _KERNEL[0] + 2 * _KERNEL[1]
    a = _job(tmp_path, resume=end + 8, launches=2)
    assert _waits(a) == [("gemm", "Optimizer.step#SGD.step")]
    (r,) = a.steps
    assert r.breakdown_ns[Category.GPU_COMPUTE] >= 2 * _KERNEL[1] * 1000 - 20_000  # the path ran on the GPU
    assert r.breakdown_ns[Category.IDLE] + r.breakdown_ns[Category.CPU] < 400_000
    faster = replay_steps(a, [Edit(2.0, kinds=(NodeKind.KERNEL,))])
    assert faster.after_ns[0] == r.wall_ns - _KERNEL[1] * 1000  # the wait followed the kernels: 2 x 1 ms saved


def test_a_thread_that_resumed_long_after_the_queue_drained_was_idle_for_itself(tmp_path: Path) -> None:
    a = _job(tmp_path, resume=_KERNEL[0] + _KERNEL[1] + 400)
    assert _waits(a) == []
    faster = replay_steps(a, [Edit(2.0, kinds=(NodeKind.KERNEL,))])
    assert faster.after_ns[0] == a.steps[0].wall_ns  # its Python, not the GPU, set the step


def test_a_short_gap_that_ends_near_a_kernel_end_is_python_between_ops(tmp_path: Path) -> None:
    # a launch-bound thread: its gaps end near kernel ends by chance
    events = [step(1, 0, 200), op("aten::add", 5, 10), runtime("cudaLaunchKernel", 8, 2, corr=1),
              kernel("add", 15, 20, corr=1), op("aten::mul", 40, 10)]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    assert _waits(a) == []


def test_a_synchronize_waits_for_the_work_queued_before_the_trace(tmp_path: Path) -> None:
    # the trace begins with 3 ms of kernels an earlier, unrecorded step queued; the step's first call waits
    backlog = [kernel("backlog", 1 + 1000 * i, 1000, corr=900 + i) for i in range(3)]
    events = [*backlog, step(1, 10, 3440), runtime("cudaDeviceSynchronize", 20, 2990, corr=1),
              op("aten::mm", 3020, 10), runtime("cudaLaunchKernel", 3022, 2, corr=2),
              kernel("gemm", 3030, 400, corr=2), runtime("cudaDeviceSynchronize", 3040, 394, corr=3)]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    assert ("backlog", "cudaDeviceSynchronize") in _waits(a)
    (r,) = a.steps
    g = a.graph
    queued = [g.trace.strings[n] == "backlog" for n in g.name]
    assert r.start_ns == (g.start_ns + g.dur_ns)[queued].max()  # the window opens as the backlog is done
    x2 = replay_steps(a, [Edit(2.0, kinds=(NodeKind.KERNEL,))]).after_ns[0]
    assert x2 == r.wall_ns - 200_000  # its own kernel's half; the backlog is an earlier step's


def test_a_wait_the_gpu_clock_says_ended_after_the_call_returned_follows_its_work(tmp_path: Path) -> None:
    # MI300: the awaited kernel ends 6 µs after the synchronize returned (the GPU's clock reads ahead)
    events = [step(1, 0, 1300), op("aten::mm", 5, 10), runtime("hipLaunchKernel", 8, 2, corr=1),
              kernel("gemm", 20, 1000, corr=1), runtime("hipDeviceSynchronize", 30, 984, corr=2),
              op("aten::add", 1030, 10)]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    (r,) = a.steps
    assert r.breakdown_ns[Category.GPU_COMPUTE] > 900_000 and r.breakdown_ns[Category.SYNC_WAIT] < 10_000
    x2 = replay_steps(a, [Edit(2.0, kinds=(NodeKind.KERNEL,))]).after_ns[0]
    assert abs((r.wall_ns - x2) - 497_000) <= 3_000  # the wait shrank with the kernel


def test_no_wait_is_inferred_on_a_trace_without_gpu(tmp_path: Path) -> None:
    events = [step(1, 0, 1000), op("aten::mm", 5, 10), op("aten::add", 600, 10)]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    assert _waits(a) == [] and np.all(a.graph.kind != NodeKind.KERNEL)
