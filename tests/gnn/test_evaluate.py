from __future__ import annotations

import math
from pathlib import Path

import pytest

from bottleneck_oracle.gnn.baselines import AggregateRegressors
from bottleneck_oracle.gnn.evaluate import (
    PREDICTORS, evaluate, plot, preferred_predictors, to_markdown, weaker_than_baselines,
)
from bottleneck_oracle.gnn.predict import Predictor


@pytest.fixture(scope="module")
def scored(tiny_splits, tiny_checkpoint):  # type: ignore[no-untyped-def]
    predictor = Predictor(tiny_checkpoint)
    regressors = AggregateRegressors(*tiny_checkpoint.baseline_rows)
    return {split: evaluate(tiny_splits[split], predictor, regressors) for split in ("test", "ood")}


def test_every_predictor_is_scored_on_the_same_steps(scored) -> None:  # type: ignore[no-untyped-def]
    test = scored["test"]
    assert test["samples"] == 1 and test["steps"] == 4
    assert set(test["baselines"]) == set(PREDICTORS[1:]) | {"duration"}
    assert test["baselines"]["replay"]["step_time_mape"] == pytest.approx(0, abs=1e-6)  # replay reads the trace
    assert set(test["whatif"]) == {"kernel_faster:gemm", "kernel_faster:attention", "collective_faster:allreduce"}
    for by in test["whatif"].values():
        assert set(by) == set(PREDICTORS) and all(v >= 0 for v in by.values())
    for metric in ("criticality_spearman", "criticality_kendall"):
        assert -1 <= test[metric] <= 1
    assert 0 <= test["on_path_auroc"] <= 1
    assert set(test["whatif_ranking_kendall"]) == set(PREDICTORS)
    assert len(test["points"]["step"]) == 4 and test["latency_ms_per_10k_nodes"] > 0


def test_markdown_and_plots(scored, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    table = to_markdown(scored)
    assert table.splitlines()[0] == "| metric | test | ood |"
    assert "| what-if collective_faster:allreduce MAPE % (replay) |" in table
    written = plot(scored, tmp_path)
    assert [p.name for p in written] == ["step_time.png", "whatif_mape.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


def test_weaker_than_baselines_names_the_better_predictor() -> None:
    result = {"step_time_mape": 5.0, "baselines": {"replay": {"step_time_mape": 0.0}, "mlp": {"step_time_mape": 9.0},
                                                   "duration": {"criticality_spearman": 0.3}},
              "whatif": {"kernel_faster:gemm": {"gnn": 1.0, "replay": 2.0, "mlp": math.nan},
                         "collective_faster:allreduce": {"gnn": 3.0, "gnn_replay": 0.5, "replay": 1.0}}}
    assert weaker_than_baselines(result) == [
        "step time: replay (0.00%) beats the GNN (5.00%)",
        "what-if collective_faster:allreduce: gnn_replay (0.50%) beats the GNN (3.00%)",
    ]
    assert preferred_predictors(result) == {"step_time": "replay", "whatif:kernel_faster:gemm": "gnn",
                                            "whatif:collective_faster:allreduce": "gnn_replay"}
