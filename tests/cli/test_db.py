"""``oracle db``, ``oracle ingest`` and ``oracle traces`` as users run them: real processes, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import run_oracle
from tests.graphdb.conftest import GPT


def _oracle(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORACLE_HOME": str(home), "ORACLE_GRAPH_URL": "embedded", "ORACLE_WORKERS": "1",
           "COLUMNS": "200"}
    return run_oracle(*args, env=env)


def _is_one_line_down_error(out: subprocess.CompletedProcess[str]) -> bool:
    lines = out.stderr.strip().splitlines()
    return (out.returncode == 2 and len(lines) == 1 and "not running" in lines[0] and "oracle db start" in lines[0]
            and "Traceback" not in out.stderr)


def test_db_start_ingest_traces_stop(tmp_path: Path) -> None:
    started = _oracle(tmp_path, "db", "start")
    assert started.returncode == 0 and "started at 127.0.0.1:" in started.stdout, started.stderr
    try:
        ingest = _oracle(tmp_path, "ingest", GPT, "--json")
        assert ingest.returncode == 0, ingest.stderr
        assert "\x1b" not in ingest.stderr  # piped: no progress bar
        report = json.loads(ingest.stdout)
        assert report["outcome"] == "loaded" and report["detail"] == "full" and report["nodes"] > 25_000
        assert report["predictions"] >= 8 and report["predictions"] % 2 == 0  # a model's view of each (step, rank)
        listed = json.loads(_oracle(tmp_path, "traces", "--json").stdout)
        assert [(t["trace_id"], t["name"], t["status"]) for t in listed] == \
            [(report["trace_id"], "gpt_2rank", "complete")]
        status = json.loads(_oracle(tmp_path, "db", "status", "--json").stdout)
        assert status["running"] and status["traces"] == 1
        table = run_oracle("traces", env={**os.environ, "ORACLE_HOME": str(tmp_path), "ORACLE_GRAPH_URL": "embedded",
                                          "COLUMNS": "80"}).stdout  # whole ids and counts at 80 columns
        assert report["trace_id"] in table and f"{listed[0]['ops']:,}" in table
        assert max(map(len, table.splitlines())) <= 80
    finally:
        stopped = _oracle(tmp_path, "db", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert _is_one_line_down_error(_oracle(tmp_path, "traces"))  # a database that is down: exit 2, how to start it
