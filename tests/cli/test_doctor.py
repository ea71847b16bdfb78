"""``oracle doctor`` as users run it: a real process doing the real checks on this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import run_oracle

REQUIRED = {"python", "torch", "falkordb", "sentence model", "disk"}


def test_doctor_is_all_green_on_this_machine(tmp_path: Path) -> None:
    env = {**os.environ, "ORACLE_HOME": str(tmp_path / "ws"), "COLUMNS": "80"}
    env.pop("NEO4J_URI", None)
    out = run_oracle("doctor", "--json", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    names = {c["name"] for c in report["checks"]}
    assert report["ok"] and REQUIRED | {"chromium", "node", "extra embed", "extra dev"} <= names
    assert [c["name"] for c in report["checks"] if not c["ok"]] == []
    torch = next(c for c in report["checks"] if c["name"] == "torch")
    assert torch["detail"].startswith("2.13.0")
    text = run_oracle("doctor", env=env)  # piped: ASCII marks, no escape codes, one line per check
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == len(report["checks"]) and all(line.startswith("ok   ") for line in lines)
    assert "\x1b" not in text.stdout and max(map(len, lines)) <= 80


def test_a_hidden_falkordb_binary_is_one_line_with_its_fix_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "bin" / "redis-server"
    env = {**os.environ, "ORACLE_HOME": str(tmp_path / "ws"), "ORACLE_FALKORDB_SERVER": str(missing)}
    out = run_oracle("doctor", env=env)
    assert out.returncode == 2
    error = out.stderr.strip().splitlines()
    assert len(error) == 1 and "Traceback" not in out.stderr
    assert error[0].startswith("error: falkordb: ") and str(missing) in error[0] and "fix: " in error[0]
    assert "ORACLE_FALKORDB_SERVER" in error[0].split("fix: ")[1]
    assert "FAIL falkordb" in out.stdout and out.stdout.count("FAIL") == 1
    report = json.loads(run_oracle("doctor", "--json", env=env).stdout)
    assert not report["ok"] and [c["name"] for c in report["checks"] if not c["ok"]] == ["falkordb"]
