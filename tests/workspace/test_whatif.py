"""Tests for workspace/whatif.py: what-if and optimize as the CLI and the agent call them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.workspace.traces import known_traces
from bottleneck_oracle.workspace.whatif import model_is_scored, optimize_trace, whatif_trace
from tests.whatif.cases import fault


def test_the_graph_model_is_wanted_only_for_edits_it_has_a_recorded_score_for() -> None:
    # the shipped checkpoint's held-out scores cover a faster all-reduce, not a fix (replay is chosen for it)
    assert model_is_scored(["scale op=allreduce x2"]) and not model_is_scored(["fix host_pause"])
    assert not model_is_scored(["scale op=allreduce x2", "scale op=gemm x2"])  # two types: no single score
    with pytest.raises(ConfigError):
        model_is_scored(["faster x2"])


def test_a_bad_edit_fails_before_anything_is_read(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workers=1)
    folder, _ = fault("host_pause")
    with pytest.raises(ConfigError, match="unknown kind 'faster'"):
        whatif_trace(folder, ["faster x2"], settings)
    assert known_traces(settings) == []


def test_whatif_on_the_slowest_step_by_default(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workers=1)
    folder, a = fault("host_pause")
    result = whatif_trace(folder, ["fix host_pause"], settings, model=False)
    assert result.step == a.slow_steps[0].step == 2 and result.best_ms < result.baseline_ms
    again = whatif_trace(folder.name, ["fix host_pause"], settings, model=False)  # by name: from the cache
    assert again.best_ms == result.best_ms


def test_optimize_with_verify_reruns_the_synthetic_job(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workers=1)
    folder, _ = fault("dataloader_stall")
    seen: list[tuple[str, int, int]] = []
    plan = optimize_trace(folder, settings, budget=2, verify=True, model=False,
                          progress=lambda *x: seen.append(x))
    assert plan.plan[0].category == "dataloader_stall" and plan.verified[0] is not None
    assert abs(plan.plan[0].prediction.best_ms - plan.verified[0]) <= 0.02 * plan.verified[0]
    assert ("re-running", len(plan.plan), len(plan.plan)) in seen and seen[0][0] == "predicting candidates"
    body = plan.to_json()
    assert body["plan"][0]["measured_ms"] == plan.verified[0] and "error_pct" in body["plan"][0]


def test_an_edit_that_names_one_step_predicts_that_step(tmp_path: Path) -> None:
    from tests.conftest import DATA

    loader0 = DATA / "resnet50_loader_workers" / "june" / "nw0"  # a stall in every step; step 5 is the slowest
    p = whatif_trace(loader0, ["fix dataloader_stall step=7"], Settings(home=tmp_path, workers=1), model=False)
    assert p.step == 7 and p.best_ms < p.baseline_ms
    assert whatif_trace(loader0, ["fix dataloader_stall"], Settings(home=tmp_path, workers=1), model=False).step == 5
