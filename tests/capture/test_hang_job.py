"""Real gloo jobs hung by one injected fault: the dumps they write name that fault in ``oracle hang``."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.analysis.hang import hang_verdict
from bottleneck_oracle.capture.hang_job import HangJob, main, run_hang_job
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.traces.flight_recorder import read_flight_record


@pytest.mark.parametrize("fields, message", [
    ({"scenario": "nap"}, "unknown scenario"),
    ({"scenario": "subgroup", "ranks": 3}, "too few"),
    ({"scenario": "skip", "fault_rank": 4}, "fault rank 4"),
    ({"scenario": "skip", "fault_step": 3}, "fault step 3"),
    ({"scenario": "p2p", "profile": True}, "--profile"),
])
def test_bad_jobs_are_refused_before_anything_runs(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        HangJob(**fields)


def test_a_bad_flag_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--scenario", "skip", "--out", str(tmp_path), "--fault-rank", "9"]) == 2
    assert "fault rank 9" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("scenario, culprit", [("skip", 2), ("sleep", 0)])
def test_a_live_hang_names_the_rank_that_caused_it(tmp_path: Path, scenario: str, culprit: int) -> None:
    # three ranks, a culprit other than the fixtures' rank 1: the verdict follows the fault, not a file
    codes = run_hang_job(HangJob(scenario, ranks=3, fault_rank=culprit, fault_step=2, steps=3), tmp_path)
    assert codes == [0, 0, 0]
    v = hang_verdict(read_flight_record(tmp_path))
    assert v.verdict == "hang" and v.culprit_ranks == (culprit,)
    assert set(v.waiting_ranks) == {0, 1, 2} - {culprit}
    assert v.cause == ("mismatch" if scenario == "skip" else "behind")
