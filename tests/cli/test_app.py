"""The ``oracle`` app: its commands and their flags, its help, and how errors become exit codes."""

from __future__ import annotations

import os

from bottleneck_oracle.cli import app
from tests.conftest import run_oracle


def test_cli_flag_set_is_frozen() -> None:
    # a new flag is a decision: update this list on purpose
    import typer.main

    group = typer.main.get_command(app)
    flags = {name: sorted(p.name for p in cmd.params) for name, cmd in group.commands.items()}  # type: ignore[attr-defined]
    assert flags["analyze"] == ["as_json", "executor", "full_paths", "overlay", "partial", "paths", "rank",
                                "ray_address", "step", "steps_from", "verbose"]
    assert flags["doctor"] == ["as_json"]
    assert flags["capture"] == ["batch_size", "d_model", "inject", "layers", "microbatches", "out_dir",
                                "pin_cpus", "pipeline", "ranks", "seed", "seq_len", "stage_layers", "steps", "whatif"]
    assert flags["ingest"] == ["as_json", "detail", "executor", "hops", "partial", "paths", "predict", "ray_address",
                               "steps_from"]
    assert flags["traces"] == ["as_json"]
    assert flags["synth"] == ["dp", "hardware", "inject", "microbatches", "model", "op_table", "out_dir", "pp", "ranks",
                              "seed", "slow_stage", "slow_worker", "steps", "tp", "uneven_microbatches", "whatif"]
    assert flags["train"] == ["data", "directed", "epochs", "hidden", "layers", "max_minutes",
                              "out", "patience", "refit_steps", "seed"]
    assert flags["gnn-eval"] == ["as_json", "checkpoint", "data", "plots", "record", "splits"]
    assert flags["ask"] == ["as_json", "base_url", "dumps", "llm", "pipeline", "question", "session", "trace", "verbose"]
    assert flags["hang"] == ["as_json", "dumps", "prefix", "traces"]
    assert flags["diff"] == ["against", "as_json", "executor", "gate", "output", "partial", "ray_address", "runs",
                             "save_baseline", "steps_from"]
    assert flags["chat"] == ["base_url", "llm", "session", "trace"]
    assert flags["serve"] == ["host", "max_upload_mb", "port", "token_file"]
    dataset = group.commands["dataset"].commands  # type: ignore[attr-defined]
    assert sorted(p.name for p in dataset["build"].params) == ["n", "out_dir", "seed"]
    evals = group.commands["eval"]
    assert sorted(p.name for p in evals.params) == ["as_json", "base_url", "cases", "llm", "report", "suite"]
    assert {name: sorted(p.name for p in cmd.params) for name, cmd in evals.commands.items()} == {  # type: ignore[attr-defined]
        "run": ["as_json", "base_url", "cases", "llm", "report", "suite"],
        "compare": ["as_json", "new", "old", "tolerance"], "make-cases": ["large", "out"]}
    db = group.commands["db"].commands  # type: ignore[attr-defined]
    assert {name: sorted(p.name for p in cmd.params) for name, cmd in db.items()} == \
        {"start": [], "stop": [], "status": ["as_json"]}


def test_no_command_prints_the_commands() -> None:
    out = run_oracle("--help")
    assert out.returncode == 0
    for command in ("analyze", "capture", "ingest", "traces", "synth", "train", "gnn-eval", "db", "dataset"):
        assert command in out.stdout


def test_an_unknown_command_or_flag_is_a_usage_error() -> None:
    assert run_oracle("analyse").returncode == 2
    out = run_oracle("ingest", "x", "--detail", "everything", env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 2 and "'everything' is not one of full, critical, summary" in out.stderr
