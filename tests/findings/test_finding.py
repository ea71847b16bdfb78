from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import CAT_INDEX, ms, own_ns, top_ops, untraced_matters, untraced_wait
from bottleneck_oracle.graph.types import Category
from bottleneck_oracle.traces import read_trace
from tests.analysis.synth_cases import synth_case
from tests.tracebuilder import kernel, op, runtime, write


def test_ms_rounds_to_microseconds() -> None:
    assert ms(1_234_567) == 1.235 and ms(0) == 0.0


def test_own_ns_counts_only_the_steps_own_rank() -> None:
    cat = np.array([CAT_INDEX[Category.CPU]] * 3, dtype=np.int8)
    r = StepReport(1, 0, 0, 60, {c: 0 for c in Category}, np.array([1, 2, 3]), cat,
                   np.array([0, 1, 0], dtype=np.int32), np.array([0, 10, 30]), np.array([10, 20, 30]), 0, 1)
    assert own_ns(r, Category.CPU) == 40 and own_ns(r, Category.IDLE) == 0


def test_top_ops_orders_by_critical_time() -> None:
    a, _ = synth_case("gpt2-small", dp=2)
    r = a.steps[0]
    names = top_ops(a.graph, r, r.path_node >= 0, k=3)
    assert len(names) == 3 and all(isinstance(n, str) and n for n in names)


def _launched(tmp_path: Path, kernels: list[tuple[float, float]]) -> Analysis:
    """One op launching each kernel (start µs, duration µs) on stream 7, 1 µs apart: no steps."""
    events = [op("aten::mm", 0, 100)]
    for i, (start, dur) in enumerate(kernels, start=1):
        events += [runtime("cudaLaunchKernel", 1 + i, 1, corr=i), kernel(f"k{i}", start, dur, corr=i)]
    return analyze(read_trace(write(tmp_path / "t.json.gz", events)))


@pytest.mark.parametrize(("kernels", "wait_ns"), [
    ([(60_000, 3_000)], 59_998_000),  # started 60 ms after its launch (at 2 µs) on an idle stream: that wait
    ([(4, 3_000)], 0),  # started at once
    ([(4, 60_000), (60_004, 3_000)], 0),  # queued behind a kernel on its stream: it waited for traced work
])
def test_untraced_wait_is_gpu_work_waiting_on_an_idle_stream(tmp_path: Path, kernels: list[tuple[float, float]],
                                                             wait_ns: int) -> None:
    a = _launched(tmp_path, kernels)
    (r,) = a.steps
    mask = untraced_wait(a.graph, r)
    assert int(r.path_dur_ns[mask].sum()) == wait_ns
    assert r.path_dur_ns[mask].sum() <= r.breakdown_ns[Category.IDLE]  # a part of the path's idle time
    assert all(a.graph.node_name(int(n)).startswith("k") for n in r.path_node[mask])  # owned by the work that waited


def test_untraced_wait_matters_from_a_tenth_of_the_step_and_a_millisecond() -> None:
    assert untraced_matters(10_000_000, 100_000_000) and not untraced_matters(9_999_999, 100_000_000)
    assert not untraced_matters(999_999, 2_000_000) and untraced_matters(1_000_000, 2_000_000)
