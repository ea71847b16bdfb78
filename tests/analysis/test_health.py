"""``trace_health``: one note per limit of a trace, and only for a trace that has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.health import HealthCode, trace_health
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.traces import read_trace
from tests.conftest import run_oracle
from tests.tracebuilder import kernel, op, runtime, step, write


def _steps(walls: list[float]) -> list[dict]:
    """ProfilerSteps of the given walls (µs), each with an op that launches a kernel."""
    events, t = [], 0.0
    for n, wall in enumerate(walls, start=1):
        events += [step(n, t, wall), op("aten::mm", t + 1, wall / 2), runtime("cudaLaunchKernel", t + 2, 1, corr=n),
                   kernel("gemm", t + 4, wall / 3, corr=n)]
        t += wall + 1
    return events


def _codes(tmp_path: Path, events: list[dict], steps_from: str | None = None, **doc: object) -> dict[HealthCode, str]:
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events, **doc)), steps_from=steps_from)
    return {n.code: n.message for n in trace_health(a)}


def test_healthy_trace_has_no_note(tmp_path: Path) -> None:
    assert _codes(tmp_path, _steps([100, 100, 100])) == {}


def test_cpu_only_trace_has_no_gpu(tmp_path: Path) -> None:
    notes = _codes(tmp_path, [step(1, 0, 50), op("aten::mm", 1, 20), step(2, 51, 50), op("aten::mm", 52, 20)])
    assert set(notes) == {HealthCode.NO_GPU}


def test_gpu_only_trace_has_no_cpu_ops_and_no_steps(tmp_path: Path) -> None:
    notes = _codes(tmp_path, [runtime("hipLaunchKernel", 0, 2, corr=1), kernel("k", 5, 10, corr=1)])
    assert set(notes) == {HealthCode.NO_CPU_OPS, HealthCode.NO_STEPS}
    assert "--steps-from" in notes[HealthCode.NO_STEPS]


def test_steps_from_annotations_are_steps(tmp_path: Path) -> None:
    events = [op("decode", 0, 30, cat="user_annotation"), op("aten::mm", 1, 20),
              op("decode", 40, 30, cat="user_annotation")]
    assert HealthCode.NO_STEPS in _codes(tmp_path, events)
    assert set(_codes(tmp_path, events, steps_from="^decode$")) == {HealthCode.NO_GPU}


def test_single_step_has_nothing_to_compare_with(tmp_path: Path) -> None:
    assert set(_codes(tmp_path, _steps([100]))) == {HealthCode.ONE_STEP}
    assert HealthCode.ONE_STEP not in _codes(tmp_path, _steps([100, 100]))


def test_python_frames_are_counted(tmp_path: Path) -> None:
    frames = [op(f"train.py({i}): f", i * 30, 25, cat="python_function") for i in range(3)]
    notes = _codes(tmp_path, _steps([100, 100, 100]) + frames)
    assert set(notes) == {HealthCode.PYTHON_STACKS}
    assert "(3 frames" in notes[HealthCode.PYTHON_STACKS]


@pytest.mark.parametrize("world,expected", [(4, True), (1, False)])
def test_one_rank_of_a_larger_world(tmp_path: Path, world: int, expected: bool) -> None:
    notes = _codes(tmp_path, _steps([100, 100, 100]), rank=0, world=world)
    assert (HealthCode.PARTIAL_WORLD in notes) == expected
    if expected:
        assert "only 1 of 4 ranks" in notes[HealthCode.PARTIAL_WORLD]


def test_last_step_cut_short_is_partial(tmp_path: Path) -> None:
    notes = _codes(tmp_path, _steps([100, 100, 100, 20]))
    assert set(notes) == {HealthCode.PARTIAL_STEP}
    assert "step 4 on rank 0" in notes[HealthCode.PARTIAL_STEP]


def test_skipped_events_give_count_and_reason(tmp_path: Path) -> None:
    notes = _codes(tmp_path, _steps([100, 100, 100]) + [op("aten::bad", 10, -5), op("aten::bad", 20, -5)])
    assert set(notes) == {HealthCode.SKIPPED_EVENTS}
    assert notes[HealthCode.SKIPPED_EVENTS].startswith("2 malformed event(s) skipped (negative dur: 2)")


def test_health_is_in_the_json_and_printed_after_the_summary(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json.gz", [runtime("hipLaunchKernel", 0, 2, corr=1), kernel("k", 5, 10, corr=1)])
    a = analyze(read_trace(path))
    health = analysis_to_dict(a)["trace"]["health"]
    assert [h["code"] for h in health] == [n.code.value for n in trace_health(a)] == ["no_cpu_ops", "no_steps"]
    done = run_oracle("analyze", path, env=None)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # rich wraps long lines
    summary = text.index("rank(s)")
    assert summary < text.index(" ".join(health[0]["message"].split())) < text.index("Steps")


@pytest.mark.parametrize(("start", "noted"), [(60_000, True), (4, False)])
def test_gpu_work_waiting_for_what_the_trace_does_not_show(tmp_path: Path, start: float, noted: bool) -> None:
    events = [op("aten::mm", 0, 100), runtime("cudaLaunchKernel", 2, 1, corr=1), kernel("gemm", start, 3_000, corr=1)]
    notes = _codes(tmp_path, events)
    assert set(notes) == {HealthCode.NO_STEPS, *([HealthCode.UNTRACED_WAIT] if noted else [])}
    if noted:  # launched at 2 µs, started at 60 ms, ended at 63 ms: the wait, its share, the work that waited
        assert "on rank 0, GPU work waited 59.998 ms (95.2% of the trace)" in notes[HealthCode.UNTRACED_WAIT]
        assert "'gemm' on stream 7, 59.998 ms" in notes[HealthCode.UNTRACED_WAIT]
