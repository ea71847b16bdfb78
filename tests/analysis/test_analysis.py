from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL
from tests.tracebuilder import kernel, op, runtime, step, sync, write


def test_partial_last_step_is_kept_out_of_findings_and_slow_steps() -> None:
    # amd_mi250: ProfilerStep#1 9.3 ms, then #2 cut to 49 µs by the end of the recording
    a = analyze(read_trace(REAL / "hta" / "amd_mi250"))
    assert [(r.step, r.rank) for r in a.steps] == [(1, 0), (2, 0)]
    assert a.slow_steps == ()
    assert all(f.step != 2 for f in a.findings)


def test_slack_is_zero_on_the_path_that_ends_the_step() -> None:
    # slack is measured against the end of the step on the last rank to finish it
    a = analyze(read_trace(REAL / "param" / "dlrm_8rank_kineto"))
    last = max(a.steps, key=lambda r: r.end_ns)
    on_path = last.path_node[last.path_node >= 0]
    assert (a.slack_ns[on_path] == 0).all()
    earlier = min(a.steps, key=lambda r: r.end_ns)
    own = earlier.path_node[(earlier.path_node >= 0) & (earlier.path_rank == earlier.rank)]
    assert (a.slack_ns[own] > 0).any()  # a rank that finished early had room
    assert (a.slack_ns > 0).mean() > 0.3


_WINDOW = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": 1, "ts": 200, "dur": 100}


@pytest.mark.parametrize("events", [
    [op("aten::mm", 10, 5)],  # a single event: the whole trace is one step
    [step(1, 0, 100)],  # a step holding nothing
    [op("aten::mm", 10, 0), op("aten::add", 10, 0)],  # zero durations at one instant
    [kernel("K", 10, 5, corr=1), kernel("K", 12, 5, corr=1)],  # GPU work only, no launcher
    [op("f", 10, 5, cat="python_function")],
    [step(1, 0, 100), sync("Event Sync", 20, 5, corr=9)],  # a sync whose record is missing
    [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 2, corr=1), runtime("cudaLaunchKernel", 11, 2, corr=1),
     kernel("K", 5, 5, corr=1)],  # one correlation, two launches, a kernel before them
    [step(1, 0, 100), op("aten::mm", 10, 5), _WINDOW],  # the recording window starts after every event
    # a step number beyond the int32 step columns: an annotation, not a step
    [op("ProfilerStep#99999999999999999999", 0, 100, cat="user_annotation"), op("aten::mm", 10, 5)],
    [step(2, 0, 100), step(1, 0, 100), step(2, 50, 100)],  # repeated and overlapping steps
])
def test_odd_shapes_give_a_result(tmp_path: Path, events: list) -> None:
    # whatever the readers let through, the analysis returns (or raises a bad-input error)
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    assert all(r.wall_ns >= 0 for r in a.steps)
