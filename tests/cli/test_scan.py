"""``oracle scan``: what it prints is the scan's (and analyze's: the walls, breakdowns, critical paths, slow
steps, findings with their causes and GPU timeline of ``--json`` are analyze's to the digit; its findings are
printed as analyze prints them), and a bad file fails in one line."""

from __future__ import annotations

import json
from pathlib import Path

from bottleneck_oracle.analysis import analyze
from bottleneck_oracle.analysis.report import cause_text
from bottleneck_oracle.executor import LocalExecutor
from bottleneck_oracle.job.scan import scan
from bottleneck_oracle.job.scan_report import scan_to_dict
from bottleneck_oracle.replay.compile import compile_edits
from bottleneck_oracle.replay.engine import replay, weights_with
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
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


def test_oracle_scan_whatif_gives_each_step_the_job_wide_replay() -> None:
    edit = "scale op=allreduce x2"
    data = json.loads(run_oracle("scan", EXAMPLE, "--no-paths", "--whatif", edit, "--json").stdout)["whatif"]
    assert data["edits"] == [edit] and data["touched"][0] > 0 and len(data["steps"]) > 2
    a = analyze(read_trace(EXAMPLE))
    job = replay(a, [], weight=weights_with(a.points, compile_edits(a, [parse_edit(edit)], a.steps[0].step).speedup))
    for row in data["steps"]:
        whatif = json.loads(run_oracle("whatif", EXAMPLE, "--edit", edit, "--step", str(row["step"]), "--no-model",
                                       "--json").stdout)
        slowest = max(w for st, rk, w in zip(job.step, job.rank, job.after_ns)
                      if st == row["step"] and (st, rk) not in a.partial_steps)
        assert (row["recorded_ms"], row["replay_ms"]) == (whatif["baseline_ms"], round(slowest / 1e6, 3))
    assert any(row["saved_ms"] > 0 for row in data["steps"])
    text = run_oracle("scan", EXAMPLE, "--whatif", edit).stdout
    first = data["steps"][0]
    assert f"What if: {edit}" in text and f"{first['recorded_ms']:.3f}" in text and f"{first['replay_ms']:.3f}" in text
    refused = run_oracle("scan", EXAMPLE, "--whatif", "fix host_pause")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "error: edit fix host_pause: a scan replays node edits only (scale, remove, set); fix reads the job's whole "
        "graph: oracle whatif"], refused.stderr
