"""``oracle scan``: what it prints is the scan's (and analyze's: the walls, breakdowns, critical paths, slow
steps, findings with their causes and GPU timeline of ``--json`` are analyze's to the digit; its findings are
printed as analyze prints them), and a bad file fails in one line."""

from __future__ import annotations

import json
from pathlib import Path

from bottleneck_oracle.dag.report import cause_text, scan_to_dict
from bottleneck_oracle.dag.scan import scan
from bottleneck_oracle.executor import LocalExecutor
from tests.conftest import REPO, run_oracle

EXAMPLE = REPO / "examples" / "gpt_2rank"


def test_oracle_scan_prints_the_findings_and_the_cause_analyze_finds() -> None:
    done = run_oracle("scan", EXAMPLE)
    assert done.returncode == 0, done.stderr
    analysed_text = run_oracle("analyze", EXAMPLE).stdout
    block = analysed_text[analysed_text.index("Findings, largest"):analysed_text.index("Why is")].strip()
    assert block in done.stdout  # analyze's findings, line for line
    why = analysed_text[analysed_text.index("Why is"):].strip()
    assert "- cause: " in why and why in done.stdout  # and why the slowest step is slow, with its cause
    want = scan_to_dict(scan([EXAMPLE], LocalExecutor(1)))
    (cause,) = [f for f in want["findings"] if f["cause"]]
    assert cause_text(cause) in " ".join(done.stdout.split())
    lean = run_oracle("scan", EXAMPLE, "--no-paths")
    (late,) = want["stragglers"]
    assert f"rank {late['ranks'][0]}, step {late['step']}: {late['impact_ms']} ms (major)" in lean.stdout
    assert "Findings" not in lean.stdout
    as_json = run_oracle("scan", EXAMPLE, "--json")
    data = json.loads(as_json.stdout)
    analysed = json.loads(run_oracle("analyze", EXAMPLE, "--json").stdout)
    assert data["findings"] == analysed["findings"] and data["gpu_bound"] == analysed["gpu_bound"]
    assert [(x["step"], x["rank"], x["wall_ms"], x["median_ms"]) for x in data["steps"]] == \
        [(x["step"], x["rank"], x["wall_ms"], x["median_ms"]) for x in analysed["steps"]]
    assert data["slow_steps"] == analysed["slow_steps"] and data["gpu_timeline"] == analysed["gpu_timeline"]
    for key in ("breakdown_ms", "critical_path_ms", "critical_path_len"):
        assert [x[key] for x in data["steps"]] == [x[key] for x in analysed["steps"]], key
    assert [[(t["name"], t["category"], t["rank"], t["contrib_us"]) for t in x["top_contributors"]] for x in data["steps"]] \
        == [[(t["name"], t["category"], t["rank"], t["contrib_us"]) for t in x["top_contributors"]] for x in analysed["steps"]]
    worst = max(data["steps"], key=lambda r: (r["slow"], r["wall_ms"]))
    assert f"Step {worst['step']} on rank {worst['rank']} ({worst['wall_ms']:.1f} ms)" in done.stdout


def test_oracle_scan_of_a_bad_file_fails_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [')
    done = run_oracle("scan", bad)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == ["error: rank0.json: truncated JSON"], done.stderr
