"""``oracle stragglers``: the verdict in 80 columns, the JSON a pipeline reads, exit 2 on bad input."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.conftest import STRAGGLERS, run_oracle


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ORACLE_HOME": str(tmp_path / "home"), "COLUMNS": "80", "NO_COLOR": "1"}


def test_text_names_the_long_stage_within_80_columns(tmp_path: Path) -> None:
    run = run_oracle("stragglers", STRAGGLERS / "ST", "--whatif", "move_layer 3->0 layers=8", env=_env(tmp_path))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("STAGE IMBALANCE: Stage 3 is the long stage")
    assert max(len(line) for line in lines) <= 80
    text = " ".join(run.stdout.split())
    assert "S = 1.179" in text and "fix: move layers off stage 3" in text and "what if move_layer 3->0" in text


def test_json_and_flags_in_place_of_the_meta(tmp_path: Path) -> None:
    shutil.copy(STRAGGLERS / "ST" / "trace.parquet", tmp_path / "st.parquet")
    run = run_oracle("stragglers", tmp_path / "st.parquet", "--dp", "2", "--pp", "4", "--json", env=_env(tmp_path))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["job"]["world_size"] == 8 and round(out["slowdown"], 4) == 1.1787 and out["stage_share"] > 1.2


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    shutil.copy(STRAGGLERS / "ST" / "trace.parquet", tmp_path / "st.parquet")
    for args, message in (((tmp_path / "st.parquet",), "no meta.yaml beside it"),
                          ((tmp_path / "st.parquet", "--dp", "2"), "--dp and --pp: give both"),
                          ((tmp_path / "st.parquet", "--dp", "3", "--pp", "4"), "dp_rank"),
                          ((STRAGGLERS / "ST", "--whatif", "move_layer 3->3 layers=8"), "two different stages")):
        run = run_oracle("stragglers", *args, env=_env(tmp_path))
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1


def test_synth_writes_an_op_table_whose_slow_worker_stragglers_names(tmp_path: Path) -> None:
    job = tmp_path / "job"
    made = run_oracle("synth", job, "--op-table", "--dp", "4", "--pp", "2", "--microbatches", "4", "--steps", "4",
                      "--slow-worker", "3:1=2", env=_env(tmp_path))
    assert made.returncode == 0, made.stderr
    assert "truth: slow_worker" in made.stdout and {p.name for p in job.iterdir()} == {
        "trace.parquet", "meta.yaml", "truth.json"}
    out = json.loads(run_oracle("stragglers", job, "--json", env=_env(tmp_path)).stdout)
    assert out["cause"] == "slow_worker" and out["fixes"][0]["workers"][0]["dp_rank"] == 3
    bad = run_oracle("synth", job, "--op-table", "--slow-worker", "3=2", env=_env(tmp_path))
    assert bad.returncode == 2 and "expected DP_RANK:STAGE=FACTOR" in bad.stderr
