"""``oracle hang``: the verdict a person reads in 80 columns, the JSON a pipeline reads, exit 2 on bad dumps."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import DATA, run_oracle

HANGS = DATA / "hangs"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ORACLE_HOME": str(tmp_path / "home"), "COLUMNS": "80", "NO_COLOR": "1"}


def test_text_names_the_culprit_and_marks_the_stuck_collective(tmp_path: Path) -> None:
    run = run_oracle("hang", HANGS / "skip", env=_env(tmp_path))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("HANG: Rank 1 went astray: it called broadcast as #3 of group 0")
    assert max(len(line) for line in lines) <= 80
    grid = lines[lines.index(next(line for line in lines if line.startswith("group 0, by rank"))) + 1:]
    rows = {int(line.split()[0]): line.split()[1:] for line in grid[1:5]}
    assert rows == {0: ["✓", "✓", "…"], 1: ["✓", "✓", "✗"], 2: ["✓", "✓", "…"], 3: ["✓", "✓", "…"]}
    assert grid[5].rstrip().endswith("^")  # under #3


def test_json_carries_the_verdict_fields(tmp_path: Path) -> None:
    run = run_oracle("hang", HANGS / "sleep", "--json", env=_env(tmp_path))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["verdict"], report["cause"], report["culprit_ranks"]) == ("hang", "behind", [1])
    assert set(report) >= {"waiting_ranks", "collective", "first_divergence", "where", "missing_dumps",
                           "skipped_files", "explanation", "next_steps", "ranks"}
    assert report["where"]["1"].endswith(".py:" + report["where"]["1"].rsplit(":", 1)[1])


def test_a_pickle_that_would_run_code_runs_nothing_and_exits_2(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    folder = tmp_path / "dumps"
    folder.mkdir()
    # protocol 0 by hand: GLOBAL builtins.exec, then REDUCE: what a crafted file holds
    (folder / "nccl_trace_rank_0").write_bytes(f"cbuiltins\nexec\n(Vopen({str(marker)!r}, 'w')\ntR.".encode())
    run = run_oracle("hang", folder, env=_env(tmp_path))
    assert run.returncode == 2, run.stderr
    assert "nccl_trace_rank_0: refused: it names builtins.exec" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not marker.exists()


def test_an_empty_folder_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    run = run_oracle("hang", tmp_path / "empty", env=_env(tmp_path))
    assert run.returncode == 2 and "no Flight Recorder dump" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
