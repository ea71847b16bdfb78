"""`oracle train` and `oracle gnn-eval` as users run them: real processes, real exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from bottleneck_oracle.gnn.predict import Predictor
from tests.conftest import run_oracle


def test_train_then_evaluate_on_a_corpus(tiny_corpus: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    out = run_oracle("train", "--data", tiny_corpus, "--out", ckpt, "--epochs", "1", "--hidden", "16", "--layers", "1",
                  "--refit-steps", "5")
    assert out.returncode == 0, out.stderr
    assert "trained on 3 traces" in out.stdout and (ckpt / "model.pt").is_file()
    out = run_oracle("gnn-eval", "--data", tiny_corpus, "--checkpoint", ckpt, "--json", "--plots", tmp_path / "plots")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    for key in ("step_time_mape", "criticality_spearman", "criticality_kendall", "on_path_auroc", "whatif",
                "baselines"):
        assert key in body
    assert set(body["splits"]) == {"test", "ood"}
    assert body["whatif"]["collective_faster:allreduce"].keys() >= {"gnn", "replay"}
    assert (tmp_path / "plots" / "step_time.png").is_file()
    text = run_oracle("gnn-eval", "--data", tiny_corpus, "--checkpoint", ckpt, "--splits", "test", "--record")
    assert text.returncode == 0 and "| step-time MAPE % (GNN) |" in text.stdout
    table = [line for line in text.stdout.splitlines() if line.startswith("| ")]
    assert len(table) > 3 and all(line.endswith("|") for line in table)  # rows whole in a pipe, to be pasted
    metrics = json.loads((ckpt / "config.json").read_text())["metrics"]
    assert metrics["preferred"]["step_time"] == "replay"  # replay reads an observed step's time off the trace
    assert Predictor(ckpt).preferred("step_time") == "replay" and Predictor(ckpt).preferred("unknown") == "gnn"


def test_bad_data_or_checkpoint_exits_2_with_one_line(tmp_path: Path) -> None:
    out = run_oracle("train", "--data", tmp_path, "--out", tmp_path / "ckpt")
    assert out.returncode == 2 and "oracle dataset build" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = run_oracle("gnn-eval", "--data", tmp_path, "--checkpoint", tmp_path)
    assert out.returncode == 2 and "not a checkpoint" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_evaluate_real_captures_with_the_shipped_checkpoint() -> None:
    from tests.conftest import REPO

    out = run_oracle("gnn-eval", "--data", REPO / "examples" / "gpt_2rank", "--json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert set(body["splits"]) == {"captured"} and body["steps"] >= 4
    assert body["whatif"] == {} and body["baselines"]["replay"]["step_time_mape"] < 1e-6
