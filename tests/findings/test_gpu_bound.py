"""Findings the GPU agrees with: host-side claims capped at the GPU's idle time, GPU-bound steps said
to be so with what keeps the GPU busy (public GPU traces of other projects, and hand-built ones)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.findings.findings import find_bottlenecks
from bottleneck_oracle.findings.gpu_bound import GPU_BOUND_SHARE, HOST_SIDE, gpu_bound_steps
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.graph.types import Bottleneck
from bottleneck_oracle.traces import read_trace
from tests.conftest import WILD
from tests.tracebuilder import kernel, op, runtime, step, write

WILD_TRACES = sorted(p.parent for p in WILD.glob("**/trace.json.gz"))


@cache
def _wild(folder: Path) -> Analysis:
    return analyze(read_trace([folder / "trace.json.gz"]))


@pytest.mark.parametrize("folder", WILD_TRACES, ids=[str(p.relative_to(WILD)) for p in WILD_TRACES])
def test_host_side_findings_claim_no_more_than_the_idle_gpu(folder: Path) -> None:
    a = _wild(folder)
    row = {(int(s), int(r)): i for i, (s, r) in enumerate(zip(a.graph.steps.step, a.graph.steps.rank))}
    for f in a.findings:
        if f.category in HOST_SIDE and f.step is not None and len(a.gpu_trace):
            idle_ms = max(a.gpu.idle_ns[row[(f.step, r)]] for r in f.ranks) / 1e6
            assert f.impact_ms <= idle_ms + 1e-3, (f, idle_ms)


def test_a_gpu_bound_step_is_called_gpu_bound_with_its_kernels() -> None:
    """Qwen1.5-0.5B training on an H100: its GPU is busy about 91% of the profiled step."""
    a = _wild(WILD / "tracelens/h100/qwen1.5_0.5b_chat")
    data = analysis_to_dict(a)
    (bound,) = data["gpu_bound"]
    assert bound["step"] == 6 and bound["busy_pct"] >= 100 * GPU_BOUND_SHARE
    assert "GPU-bound" in bound["evidence"] and bound["kernels"] and bound["op_classes"]
    # the top kernels are the step's GPU work, largest first
    times = [k["ms"] for k in bound["kernels"]]
    assert times == sorted(times, reverse=True) and times[0] > 1.0
    assert {c["class"] for c in bound["op_classes"]} >= {"gemm", "attention"}
    assert not [f for f in a.findings if f.category in HOST_SIDE]


def test_a_host_bound_step_is_called_host_bound() -> None:
    """BERT small on an H100: 60 tiny kernels in a 4 ms step, the GPU busy under 10% of it."""
    a = _wild(WILD / "tracelens/h100/bert_small")
    assert not analysis_to_dict(a)["gpu_bound"]
    assert a.findings and a.findings[0].category == Bottleneck.LAUNCH_OVERHEAD


def _job(tmp_path: Path, side_kernel_us: float) -> Analysis:
    """Three steps of ten ops, each 290 µs of host work that ends launching a 50 µs kernel; each step
    first launches one kernel of ``side_kernel_us`` on another stream (0: none)."""
    events, t0 = [], 0.0
    for n in range(3):
        events.append(step(n, t0, 3000))
        if side_kernel_us:
            events += [runtime("cudaLaunchKernel", t0 + 1, 4, corr=100 * n + 99),
                       kernel("ampere_sgemm_256x128_nn", t0 + 5, side_kernel_us, corr=100 * n + 99, stream=9)]
        for k in range(10):
            at = t0 + 10 + 300 * k
            events += [op("aten::mm", at, 290), runtime("cudaLaunchKernel", at + 280, 8, corr=100 * n + k),
                       kernel("ampere_sgemm_128x64_nn", at + 285, 50, corr=100 * n + k)]
        t0 += 3100
    return analyze(read_trace([write(tmp_path / "job.json.gz", events)]))


def test_a_busy_gpu_drops_the_host_side_chronic_finding(tmp_path: Path) -> None:
    """The same host work: alone, the GPU idles and the host is the bottleneck; beside a long kernel on
    another stream, the GPU is busy nearly all of each step and a faster host cannot make it shorter,
    though the critical path still runs on the host."""
    idle = _job(tmp_path / "idle", 0.0)
    busy = _job(tmp_path / "busy", 2900.0)
    assert not gpu_bound_steps(idle.graph, idle.gpu, [(r.step, r.rank) for r in idle.steps])
    assert [f.category for f in idle.findings if f.step is None] == [Bottleneck.LAUNCH_OVERHEAD]
    assert [f.category for f in find_bottlenecks(busy.graph, list(busy.steps), set()) if f.step is None] == [
        Bottleneck.LAUNCH_OVERHEAD]  # what the critical path alone would claim
    assert [b.step for b in gpu_bound_steps(busy.graph, busy.gpu, [(r.step, r.rank) for r in busy.steps])] == [None]
    assert not [f for f in busy.findings if f.category in HOST_SIDE]


def test_a_rank_verdict_gives_a_steps_gpu_time_not_the_sum_of_its_steps(tmp_path: Path) -> None:
    busy = _job(tmp_path / "busy", 2900.0)
    (bound,) = gpu_bound_steps(busy.graph, busy.gpu, [(r.step, r.rank) for r in busy.steps])
    # a step holds one 2.9 ms side kernel and ten 50 µs ones: 3.4 ms of GEMM, within its 3 ms window
    # and beyond it by the kernels' overlap, never the 10.2 ms of three steps
    assert dict(bound.op_classes)["gemm"] == pytest.approx(3.4, abs=1e-6)
    assert dict(bound.kernels)["ampere_sgemm_256x128_nn"] == pytest.approx(2.9, abs=1e-6)
    assert "GPU time by op class (a step's mean): gemm 3.4 ms" in bound.evidence
