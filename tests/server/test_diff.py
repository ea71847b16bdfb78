"""``GET /api/diff`` on a real server: two uploaded captures compared by the same service function as
``oracle diff``, the same JSON document, and one-line errors for traces that are not there."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from bottleneck_oracle.config import Settings
from tests.conftest import run_oracle


def test_the_api_gives_the_json_of_oracle_diff(server: str, server_settings: Settings,
                                               uploaded_pair: dict[str, dict[str, Any]]) -> None:
    response = httpx.get(f"{server}/api/diff", params={"base": "pair_base", "new": "pair_stall"}, timeout=120)
    assert response.status_code == 200, response.text
    doc = response.json()
    assert doc["verdict"] == "slower" and doc["confidence"] >= 0.95
    assert doc["moved"]["categories"][0]["category"] == "data_loading"
    assert doc["whatif"]["edit"] == "fix dataloader_stall"
    assert doc["base_trace"]["trace_id"] == uploaded_pair["base"]["id"]
    cli = run_oracle("diff", "pair_base", "pair_stall", "--format", "json",
                     env={**os.environ, "ORACLE_HOME": str(server_settings.home)})
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == doc


def test_the_other_way_round_is_faster_by_the_same_ms(server: str, uploaded_pair: dict[str, dict[str, Any]]) -> None:
    ids = uploaded_pair["stall"]["id"], uploaded_pair["base"]["id"]
    doc = httpx.get(f"{server}/api/diff", params={"base": ids[0], "new": ids[1]}, timeout=120).json()
    there = httpx.get(f"{server}/api/diff", params={"base": ids[1], "new": ids[0]}, timeout=120).json()
    assert doc["verdict"] == "faster" and doc["delta_ms"] == -there["delta_ms"]


def test_a_trace_that_is_not_there_or_missing_is_one_line(server: str, uploaded_pair: dict[str, dict[str, Any]]) -> None:
    missing = httpx.get(f"{server}/api/diff", params={"base": "pair_base", "new": "no_such_run"})
    assert missing.status_code == 404 and "no_such_run" in missing.json()["detail"]
    assert "\n" not in missing.json()["detail"]
    bad = httpx.get(f"{server}/api/diff", params={"base": "pair_base"})
    assert bad.status_code == 400 and "new" in bad.json()["detail"]
