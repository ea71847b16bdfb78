"""``hang_report``: the dumps' verdict, joined with the profiler traces of the same real hung job."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.workspace.hang import hang_report
from tests.conftest import DATA

PROFILED = DATA / "hangs" / "sleep_profiled"  # rank 1 pauses 300 ms in step 2, then never enters all_reduce #6


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(home=tmp_path_factory.mktemp("hang_home"), workers=1)


def test_the_culprit_comes_with_its_last_profiled_step(settings: Settings) -> None:
    report = hang_report(PROFILED, settings, traces=PROFILED / "traces")
    assert report["culprit_ranks"] == [1] and report["collective"]["seq"] == 6
    [last] = report["profiled"]
    assert (last["rank"], last["step"]) == (1, 2)
    assert last["wall_ms"] > 300  # the injected pause is inside the step
    assert any(f.startswith("host_pause on rank 1") for f in last["findings"])
    assert last["top_ops"][0]["ms"] >= last["top_ops"][-1]["ms"]
    assert report["profiled_from"] == str(PROFILED / "traces")


def test_without_traces_no_join_and_a_rank_not_profiled_is_said(settings: Settings, tmp_path: Path) -> None:
    assert "profiled" not in hang_report(PROFILED, settings)
    one = tmp_path / "one"
    one.mkdir()
    (one / "rank0.pt.trace.json.gz").write_bytes((PROFILED / "traces" / "rank0.pt.trace.json.gz").read_bytes())
    [last] = hang_report(PROFILED, settings, traces=one)["profiled"]
    assert last == {"rank": 1, "step": None, "note": "rank 1 is not in the profiled traces"}
