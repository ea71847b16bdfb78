from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.graph import build_graph
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import kernel, op, runtime, step, write


def test_gpu_work_belongs_to_the_step_that_launched_it(tmp_path: Path) -> None:
    # K runs during step 2's CPU range but was launched in step 1
    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 90, 5, corr=1), step(2, 100, 100),
              op("aten::add", 120, 10), kernel("K", 95, 60, corr=1)]
    g = build_graph(read_trace(write(tmp_path / "t.json.gz", events)))
    by_name = {g.node_name(i): int(g.step[i]) for i in range(len(g))}
    assert by_name["K"] == 1 and by_name["aten::add"] == 2
    steps = g.steps
    assert steps.step.tolist() == [1, 2]
    assert steps.end_ns.tolist() == [155_000, 200_000]  # step 1 ends with its kernel


def test_no_step_annotation_means_one_whole_trace_step(tmp_path: Path) -> None:
    g = build_graph(read_trace(write(tmp_path / "t.json.gz", [op("a", 5, 10), op("b", 30, 10)])))
    assert g.steps.step.tolist() == [-1]
    assert (g.steps.start_ns.tolist(), g.steps.end_ns.tolist()) == ([0], [35_000])
