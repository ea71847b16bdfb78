"""The report written from suite results: report.json round-trips, report.md shows the baselines
beside the oracle, per-category accuracy, MAPE per edit type and predictor, the failed cases; the
PNGs are real PNGs; a missing or bad report is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.report import read_report, write_report
from bottleneck_oracle.evals.types import CaseResult, SuiteResult
from tests.evals.reports import results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_write_report_writes_json_markdown_and_plots(tmp_path: Path) -> None:
    written = results()
    out = write_report(written, tmp_path / "r", meta={"llm": "offline", "cases": "somewhere"})
    assert out == tmp_path / "r"
    data = read_report(out)
    assert data == json.loads((out / "report.json").read_text())
    assert data["meta"]["llm"] == "offline" and data["meta"]["version"] and data["meta"]["date"]
    assert data["meta"]["suites"] == ["rootcause", "whatif"]
    for name, result in written.items():  # exactly SuiteResult.to_json() under the suite's name
        assert data[name] == json.loads(json.dumps(result.to_json()))
    for png in ("confusion.png", "whatif.png"):
        head = (out / png).read_bytes()[:8]
        assert head == PNG_MAGIC, png


def test_report_markdown_shows_baselines_categories_mape_and_failures(tmp_path: Path) -> None:
    md = (write_report(results(), tmp_path, meta={"llm": "offline"}) / "report.md").read_text()
    assert "| metric | oracle | blind floor | findings only |" in md
    assert "| top1_accuracy | 0.750 | 0.000 | 0.500 |" in md
    assert "| false_positive_rate | 0.000 | 1.000 | 0.000 |" in md
    assert "**per category**" in md and "| straggler_rank | 0.000 | - |" in md  # findings-only has none
    assert "**mape by edit type**" in md
    assert "|  | replay | gnn_replay | n |" in md and "| scale | 3.000 | 8.000 | 1 |" in md
    assert "3 of 4 cases passed. Failed:" in md
    assert "- `late`: wrong category: expected straggler_rank at step 3 on rank 1 (op), got host_sync" in md
    assert "![confusion](confusion.png)" in md and "![whatif](whatif.png)" in md


def test_report_without_plot_keys_has_no_plots_and_keeps_going(tmp_path: Path) -> None:
    bare = {"rootcause": SuiteResult("rootcause", {"top1_accuracy": None, "n_cases": 1},
                                     (CaseResult("x", False, {"reason": "trace unreadable"}),)),
            "latency": SuiteResult("latency", {"latency_p50_s": 0.2})}
    out = write_report(bare, tmp_path, meta={})
    assert not (out / "confusion.png").exists() and not (out / "whatif.png").exists()
    md = (out / "report.md").read_text()
    assert "| top1_accuracy | - |" in md and "- `x`: trace unreadable" in md and "## latency" in md


def test_a_second_report_in_the_same_folder_drops_stale_plots(tmp_path: Path) -> None:
    write_report(results(), tmp_path, meta={})
    write_report({"latency": SuiteResult("latency", {"latency_p50_s": 0.2})}, tmp_path, meta={})
    assert not (tmp_path / "confusion.png").exists()
    assert set(read_report(tmp_path)) == {"meta", "latency"}


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such folder"), ("", "no report.json"), ("{not json", "not a readable report"),
    ("[1, 2]", "not an evaluation report"), ('{"meta": {}, "rootcause": 3}', "suite 'rootcause' is not an object"),
])
def test_read_report_says_what_is_wrong_in_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    folder = tmp_path / "r"
    if content is not None:
        folder.mkdir()
        if content:
            (folder / "report.json").write_text(content)
    with pytest.raises(ConfigError) as raised:
        read_report(folder)
    assert message in str(raised.value) and "\n" not in str(raised.value)
