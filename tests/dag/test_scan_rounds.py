"""Tests for dag/scan_rounds.py: a rank's trace kept on its node between rounds, taken by the last, read again
where none was kept."""

from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.dag.scan_rounds import keys_task, summary_task
from bottleneck_oracle.dag.summary import JobFrame, match_job
from bottleneck_oracle.traces import trace_files
from tests.conftest import REPO
from tests.test_executor import _same

EXAMPLE = REPO / "examples" / "gpt_2rank"


def test_a_rank_s_second_round_reads_its_file_again_where_round_one_left_nothing(tmp_path: Path) -> None:
    """On a cluster, round 2 may run on another node than round 1: the rank is read again, to the same summary."""
    files = [f for f, _ in trace_files([EXAMPLE])]
    read = [r for r in (keys_task((f, False, tmp_path / f"{i}.trace")) for i, f in enumerate(files)) if r]
    files = [r[1] for r in read]
    keys = [r[3] for r in read]
    jobs, _ = match_job(keys, JobFrame.of(keys))
    spill = tmp_path / f"{[f for f, _ in trace_files([EXAMPLE])].index(files[0])}.trace"
    assert spill.exists()
    spilled = summary_task((files[0], True, spill, jobs[0], None, True, False))
    assert spill.exists()  # kept for the last round
    summary_task((files[0], True, spill, jobs[0], None, True, True))
    assert not spill.exists()  # taken: no round follows
    again = summary_task((files[0], True, spill, jobs[0], None, True, False))
    _same(spilled, again, "summary")
