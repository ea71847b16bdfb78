"""The run's verdict on real traces: Kineto's public ResNet-50 run with a single-process data loader is
input-bound and the saving its fix predicts holds against the same run with four loader workers; a
saturated GPU is GPU-bound; a CPU capture has no GPU to blame; and the rule holds on every public trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis import Analysis, analyze
from bottleneck_oracle.analysis.diff import steady_steps
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.whatif.run_verdict import GPU_SATURATED_PCT, LARGE_PCT, run_verdict
from tests.conftest import DATA, REPO, WILD

RESNET = DATA / "resnet50_loader_workers"


def _wild_folders() -> list[Path]:
    return sorted({p.parent for p in WILD.rglob("*.json.gz")}) if WILD.is_dir() else []


@pytest.fixture(scope="module")
def loader0() -> Analysis:
    return analyze(read_trace(RESNET / "june" / "nw0"))


def test_a_single_process_loader_makes_the_run_input_bound(loader0: Analysis) -> None:
    v = run_verdict(loader0)
    assert v.verdict == "input-bound" and v.cause is not None and v.cause.edits == ("fix dataloader_stall",)
    assert v.gpu_busy_pct is not None and v.gpu_busy_pct < GPU_SATURATED_PCT  # the GPU idles while the loader runs
    assert 100 * v.cause.saving_ms / v.median_step_ms >= LARGE_PCT  # type: ignore[operator]
    lo, hi = v.cause.interval_ms  # type: ignore[misc]
    assert lo <= v.cause.saving_ms <= hi  # type: ignore[operator]
    # the same run with four loader workers: its steady median lies where the fix's saving says it would
    after = analyze(read_trace(RESNET / "june" / "nw4"))
    measured = float(np.median(steady_steps(after).steady_ms))
    assert v.median_step_ms - hi <= measured <= v.median_step_ms - lo
    assert run_verdict(after).verdict != "input-bound"  # the workers took the loading off the path


def test_the_headline_states_the_numbers_of_the_verdict(loader0: Analysis) -> None:
    v = run_verdict(loader0)
    doc = v.to_json()
    assert doc["verdict"] == "input-bound" and doc["steady_count"] == len(v.steady)
    for number in (v.median_step_ms, v.cause.exposed_ms, v.cause.saving_ms, v.gpu_busy_pct):  # type: ignore[union-attr]
        assert f"{number:g}" in v.headline()


def test_a_cpu_capture_has_no_gpu_to_blame() -> None:
    v = run_verdict(analyze(read_trace(REPO / "examples" / "gpt_2rank")))
    assert v.gpu_busy_pct is None and v.verdict == "host-bound" and "no GPU work" in v.headline()
    assert 5 in v.set_aside and 5 not in v.steady  # the paused step is an outlier, not the run


@pytest.mark.parametrize("folder", _wild_folders(), ids=lambda p: str(p.relative_to(WILD)))
def test_the_rule_on_every_public_trace(folder: Path) -> None:
    v = run_verdict(analyze(read_trace(folder)))
    if v.verdict == "no-steps":
        return
    large = [c for c in v.causes if c.name != "gpu" and c.saving_ms is not None
             and 100 * c.saving_ms / v.median_step_ms >= LARGE_PCT]
    # a cause saves at most its own time on the path: the time the headline gives is the time its fix takes
    assert all(c.saving_ms <= c.exposed_ms for c in v.causes if c.saving_ms is not None), v.causes
    if v.verdict == "gpu-bound":  # only a saturated GPU with nothing large to remove
        assert v.gpu_busy_pct is not None and v.gpu_busy_pct >= GPU_SATURATED_PCT and not large
    else:
        assert v.cause is not None and v.cause.name != "gpu"
        assert (v.cause == large[0]) if large else all(c.exposed_ms <= v.cause.exposed_ms for c in v.causes
                                                       if c.name != "gpu")


def test_a_launch_bound_run_counts_the_cpu_ops_its_fix_takes_away() -> None:
    """Kineto's first ResNet-50 sample (December 2020): the host issues kernels 68% of a step, and the launch
    overhead finding's fix (``replay/fix.py``: the host time issuing GPU work, CPU ops and launches) takes CPU
    ops as well as the launch calls' 19 ms. The cause's time is what its fix takes; the host keeps its gaps."""
    v = run_verdict(analyze(read_trace(RESNET / "dec" / "nw0")))
    causes = {c.name: c for c in v.causes}
    assert v.verdict == "launch-bound" and v.cause is causes["launch"]
    launch = causes["launch"]
    assert launch.saving_ms is not None and launch.saving_ms <= launch.exposed_ms
    assert launch.exposed_pct > 50 and "CPU ops and kernel launches" in v.headline()
    assert causes["host"].exposed_ms < 0.2 * v.median_step_ms  # the gaps between ops, not the ops
    assert causes["input"].saving_ms is not None  # the loader's stall is a cause too: the re-run's gain


def test_a_chronic_straggler_saves_no_more_than_its_waits_on_the_path() -> None:
    """Two gloo ranks on two cores: rank 0 reaches the all-reduce late in most steps, but the slowest rank's path
    holds no wait (rank 0 is that rank, computing). Fixing the straggler would shorten rank 0's own work, which
    is host time, so the run is host-bound, not communication-bound with 0 ms of communication."""
    v = run_verdict(analyze(read_trace(DATA / "gloo_checkpoint_stall")))
    comm = next((c for c in v.causes if c.name == "communication"), None)
    assert v.verdict == "host-bound"
    assert comm is None or comm.saving_ms is None or comm.saving_ms <= comm.exposed_ms
