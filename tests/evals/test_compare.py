"""Two reports compared: a metric that moved the wrong way beyond the tolerance is a regression
(by its direction: accuracy down, false positives or MAPE up), one that moved the right way an
improvement, a case that passed and now fails a case regression; baselines and counts are ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bottleneck_oracle.evals.compare import compare_reports
from bottleneck_oracle.evals.report import read_report, write_report
from tests.evals.reports import results, rootcause, whatif


def _report(tmp_path: Path, name: str, **changes: object) -> dict[str, object]:
    return read_report(write_report(results(**changes), tmp_path / name, meta={"llm": "offline"}))


def test_equal_reports_have_no_regression(tmp_path: Path) -> None:
    found = compare_reports(_report(tmp_path, "a"), _report(tmp_path, "b"))
    assert not found.has_regression and found.regressions == found.improvements == [] == found.case_regressions
    assert "**no regression**" in found.to_markdown()


def test_worse_metrics_and_a_newly_failing_case_are_regressions(tmp_path: Path) -> None:
    old = _report(tmp_path, "old")
    new = _report(tmp_path, "new", top1_accuracy=0.5, false_positive_rate=0.25, failing=["sync"])
    new["whatif"]["mape_by_edit_type"]["scale"]["replay"] = 6.0  # type: ignore[index]
    new["whatif"]["mape"] = 4.5  # type: ignore[index]
    found = compare_reports(old, new)
    assert found.has_regression
    assert found.regressions == [("rootcause", "top1_accuracy", 0.75, 0.5),
                                 ("rootcause", "false_positive_rate", 0.0, 0.25),
                                 ("whatif", "mape", 4.0, 4.5),
                                 ("whatif", "mape_by_edit_type.scale.replay", 3.0, 6.0)]
    assert found.case_regressions == [("rootcause", "sync")] and found.improvements == []
    md = found.to_markdown()
    assert "| rootcause | top1_accuracy | 0.75 | 0.5 |" in md and "- rootcause: `sync`" in md


def test_better_metrics_are_improvements_not_regressions(tmp_path: Path) -> None:
    old = _report(tmp_path, "old", top1_accuracy=0.5, false_positive_rate=0.25, failing=["sync"])
    new = _report(tmp_path, "new")
    new["whatif"]["mape_by_predictor"]["gnn_replay"] = 5.0  # type: ignore[index]
    found = compare_reports(old, new)
    assert not found.has_regression
    assert ("rootcause", "top1_accuracy", 0.5, 0.75) in found.improvements
    assert ("whatif", "mape_by_predictor.gnn_replay", 9.0, 5.0) in found.improvements
    assert found.case_fixes == [("rootcause", "sync")]


def test_a_drop_in_one_category_is_a_regression(tmp_path: Path) -> None:
    per_category = {"host_sync": 0.0, "none": 1.0, "straggler_rank": 0.0, "launch_overhead": 1.0}
    old, new = _report(tmp_path, "old"), _report(tmp_path, "new", per_category=per_category)
    assert compare_reports(old, new).regressions == [("rootcause", "per_category.host_sync", 1.0, 0.0)]


def test_moves_within_tolerance_counts_baselines_and_unknown_names_are_ignored(tmp_path: Path) -> None:
    old = _report(tmp_path, "old")
    new = json.loads(json.dumps(old))
    new["rootcause"]["top1_accuracy"] = 0.745  # within 0.01
    new["whatif"]["mape"] = 4.03  # within 1% of 4
    new["rootcause"]["n_cases"] = 1
    new["whatif"]["mape_by_edit_type"]["scale"]["n"] = 9
    new["rootcause"]["baselines"]["findings_only"]["top1_accuracy"] = 0.0
    new["rootcause"]["mystery_score"] = -5
    new["meta"]["llm"] = "openai:x"
    assert not compare_reports(old, new).has_regression
    assert compare_reports(old, new, tolerance=0.0).regressions == [("rootcause", "top1_accuracy", 0.75, 0.745),
                                                                    ("whatif", "mape", 4.0, 4.03)]


def test_a_suite_or_case_gone_from_the_new_report_is_listed_not_a_regression() -> None:
    old = {"meta": {}, "rootcause": rootcause().to_json(), "whatif": whatif().to_json()}
    new = {"meta": {}, "rootcause": {**rootcause().to_json(), "cases": rootcause().to_json()["cases"][:3]}}
    found = compare_reports(old, new)
    assert not found.has_regression and found.missing == ["rootcause/launch", "whatif"]


def test_a_negative_tolerance_is_refused() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        compare_reports({}, {}, tolerance=-1)
