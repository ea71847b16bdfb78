"""The graph-model suite on a real synthetic job (a 40 ms data-loader stall on rank 1 in step 2): the
shipped checkpoint's step times against the recorded ones, and its criticality against the critical path."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.gnn_suite import run_gnn
from bottleneck_oracle.evals.types import Case, Expect
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.truth.injection import parse_injection

pytest.importorskip("torch_geometric")


@pytest.fixture(scope="module")
def stalled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gnn_suite") / "stall"
    synthesize(folder, SynthConfig(model="gpt2-small", dp=2, steps=4,
                                   injections=(parse_injection("dataloader_stall@2:1=40ms"),)), workers=1)
    return folder


def test_run_gnn_beats_a_reference_blind_to_the_stall(stalled: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    missing.mkdir()
    cases = [Case("stall", stalled, (), Expect("dataloader_stall", 2, (1,))), Case("missing", missing, (),
                                                                                   Expect("none", 2))]
    result = run_gnn(cases, Settings(home=tmp_path, workers=2))
    stall, broken = result.cases
    d = stall.details
    assert d["steps"] == len(d["step_ms"]) >= 3
    true_ms = [p["true_ms"] for p in d["step_ms"]]
    assert max(true_ms) > 1.5 * statistics.median(true_ms)  # the stalled step is in the truth
    # a reference that says every step takes the median step's time misses the stall
    blind = 100 * statistics.mean(abs(statistics.median(true_ms) / t - 1) for t in true_ms)
    m = result.metrics
    assert math.isfinite(m["step_mape"]) and m["step_mape"] < blind / 2, (m, blind)
    assert m["step_mape"] == d["step_mape"] == pytest.approx(
        100 * statistics.mean(abs(p["predicted_ms"] / p["true_ms"] - 1) for p in d["step_ms"]), abs=0.05)
    assert stall.passed and m["step_mape"] < m["baselines"]["compute_sum"]
    assert m["baselines"]["replay"] == pytest.approx(0, abs=0.01)  # the DAG replays an observed step exactly
    assert 0.5 < m["criticality_auc"] <= 1.0 and -1.0 <= m["criticality_spearman"] <= 1.0
    assert not broken.passed and "error" in broken.details
    assert (m["n"], m["failed"], m["steps"]) == (1, 1, d["steps"])
