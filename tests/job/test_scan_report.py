"""The JSON shape of a scan: each step and finding in analyze's shape, its slowest rank's replay per step."""

from __future__ import annotations

from bottleneck_oracle.analysis import analyze
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.executor import LocalExecutor
from bottleneck_oracle.job.scan import scan
from bottleneck_oracle.job.scan_report import scan_to_dict
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "gpt_2rank"


def test_scan_to_dict_gives_analyze_s_steps_and_each_step_s_slowest_rank_under_the_edit() -> None:
    edit = parse_edit("scale op=allreduce x2")
    data = scan_to_dict(scan([EXAMPLE], LocalExecutor(1), edits=[edit]), top=3)
    analysed = analysis_to_dict(analyze(read_trace(EXAMPLE)), top=3)
    keys = ("step", "rank", "wall_ms", "median_ms", "slow", "partial", "breakdown_ms")
    assert [{k: x[k] for k in keys} for x in data["steps"]] == [{k: x[k] for k in keys} for x in analysed["steps"]]
    assert all(len(x["top_contributors"]) == 3 for x in data["steps"])
    assert data["findings"] == analysed["findings"] and data["ranks"] == [0, 1]
    whatif = data["whatif"]
    assert whatif["edits"] == ["scale op=allreduce x2"]
    complete = [x for x in data["steps"] if not x["partial"]]
    for row in whatif["steps"]:
        walls = [x["wall_ms"] for x in complete if x["step"] == row["step"]]
        assert row["recorded_ms"] == max(walls)
        assert row["saved_ms"] == round(row["recorded_ms"] - row["replay_ms"], 3)
    assert sorted(r["step"] for r in whatif["steps"]) == sorted({x["step"] for x in complete})


def test_scan_to_dict_without_edits_has_no_whatif_block() -> None:
    assert scan_to_dict(scan([EXAMPLE], LocalExecutor(1), critical_paths=False))["whatif"] is None
