"""The service behind ``oracle stragglers``, the agent's tool and the API: the report, its files, its edits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.workspace.stragglers import straggler_report
from tests.conftest import STRAGGLERS


def test_the_report_writes_a_heatmap_png_and_a_perfetto_json(tmp_path: Path) -> None:
    out = straggler_report(STRAGGLERS / "AR", Settings.from_env(), edits=["fix straggler_rank rank=0"],
                           heatmap=tmp_path / "h.png", timeline=tmp_path / "t.json")
    assert out["cause"] == "slow_worker" and out["fixes"][0]["workers"] == [{"rank": 0, "dp_rank": 0, "stage": 0}]
    png = (tmp_path / "h.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5_000
    trace = json.loads((tmp_path / "t.json").read_text())
    assert {e["ph"] for e in trace["traceEvents"]} == {"X", "M"}
    assert out["whatif"][0]["predicted_step_s"] == pytest.approx(out["fixes"][0]["predicted_step_s"])


def test_edits_are_checked_before_the_replays_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown kind 'speed'"):
        straggler_report(STRAGGLERS / "ST", Settings.from_env(), edits=["speed up everything"])
    with pytest.raises(ConfigError, match="an empty edit"):
        straggler_report(STRAGGLERS / "ST", Settings.from_env(), edits=[" ; "])


def test_a_folder_of_a_pipeline_captures_traces_is_analysed_as_its_op_table(tmp_path: Path) -> None:
    import shutil

    from tests.conftest import DATA

    for trace in (DATA / "pipeline" / "slow_worker").glob("rank*.pt.trace.json.gz"):
        shutil.copy(trace, tmp_path)
    from_traces = straggler_report(tmp_path, Settings.from_env())
    from_table = straggler_report(DATA / "pipeline" / "slow_worker", Settings.from_env())
    assert from_traces["cause"] == from_table["cause"] == "slow_worker"
    assert from_traces["fixes"][0]["workers"] == [{"rank": 2, "dp_rank": 1, "stage": 0}]  # the injected rank
    assert from_traces["slowdown"] == pytest.approx(from_table["slowdown"], abs=1e-6)
    assert (from_traces["job"]["dp_size"], from_traces["job"]["pp_size"]) == (2, 2)
