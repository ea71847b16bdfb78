"""What-if replay on hand-built and real traces: known answers and invariants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.types import NodeKind
from bottleneck_oracle.replay.engine import Edit, replay
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL
from tests.tracebuilder import kernel, op, runtime, step, write


def test_no_edit_replays_the_observed_step_times() -> None:
    a = analyze(read_trace(REAL / "param" / "dlrm_8rank_kineto"))
    r = replay(a, [])
    assert np.array_equal(r.before_ns, r.after_ns)
    assert r.before_ns.tolist() == [s.wall_ns for s in a.steps]


def test_faster_kernel_shortens_a_gpu_bound_step_by_its_time(tmp_path: Path) -> None:
    # CPU launches K1 (40 ms) and K2 (20 ms) back to back, then waits for the GPU
    events = [step(1, 0, 70_000), runtime("cudaLaunchKernel", 1_000, 5, corr=1),
              runtime("cudaLaunchKernel", 1_010, 5, corr=2), runtime("cudaDeviceSynchronize", 1_020, 60_000, corr=3),
              op("aten::add", 62_000, 1_000),
              kernel("K1", 1_008, 40_000, corr=1), kernel("K2", 41_010, 20_000, corr=2)]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    (r,) = replay(a, [Edit(2.0, name="^K1$")]).after_ns.tolist()
    assert r == 70_000_000 - 20_000_000  # K1's 40 ms become 20 ms; everything after moves up
    (r,) = replay(a, [Edit(float("inf"), kinds=(NodeKind.KERNEL,))]).after_ns.tolist()
    assert r == 70_000_000 - 60_000_000  # no GPU time left: the sync returns at once


def test_faster_allreduce_helps_only_where_it_was_critical() -> None:
    a = analyze(read_trace(REAL / "param" / "dlrm_8rank_kineto"))
    faster = replay(a, [Edit(2.0, collective="sendrecv")])
    assert (faster.after_ns <= faster.before_ns).all()
    slower_comm = replay(a, [Edit(0.5, collective="sendrecv")])
    assert (slower_comm.after_ns >= slower_comm.before_ns).all()
    assert (slower_comm.after_ns > slower_comm.before_ns).any()


def test_edit_rejects_a_bad_speedup() -> None:
    with pytest.raises(ValueError):
        Edit(0.0)
