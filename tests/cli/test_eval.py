"""``oracle eval`` as users (and CI) run it: real processes, real exit codes. ``compare`` exits 1 on a
regression, 0 on none, 2 on bad input; and an agent with one detector disabled shows up as a
regression against the intact one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.cases import dump_case
from bottleneck_oracle.evals.report import write_report
from bottleneck_oracle.evals.run import run_suites
from bottleneck_oracle.evals.types import Case, Expect
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.truth.injection import parse_injection
from tests.conftest import run_oracle
from tests.evals.reports import results

# two synthetic GPU jobs whose faults the detectors find (tests/agent/test_e2e_synth.py):
# id -> (injection, job, ranks the cause is on, a culprit op the answer must name)
JOBS = {
    "pipeline_bubble": ("pipeline_bubble@3=20ms", {"model": "tiny", "pp": 2, "microbatches": 4}, (), "SendRecv"),
    "host_sync": ("host_sync@3:1=20ms", {"model": "gpt2-small", "dp": 2}, (1,), "cudaStreamSynchronize"),
}


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "ORACLE_HOME": str(home), "ORACLE_WORKERS": "2", "COLUMNS": "200"}


def _written(tmp_path: Path, name: str, **changes: object) -> Path:
    return write_report(results(**changes), tmp_path / name, meta={"llm": "offline"})


def test_compare_exits_0_on_equal_reports(tmp_path: Path) -> None:
    out = run_oracle("eval", "compare", _written(tmp_path, "a"), _written(tmp_path, "b"), env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "no regression" in out.stdout


def test_compare_exits_1_on_a_metric_or_case_regression(tmp_path: Path) -> None:
    old = _written(tmp_path, "old")
    worse = run_oracle("eval", "compare", old, _written(tmp_path, "worse", top1_accuracy=0.5), env=_env(tmp_path))
    assert worse.returncode == 1, worse.stderr
    assert "| rootcause | top1_accuracy | 0.75 | 0.5 |" in worse.stdout
    failing = _written(tmp_path, "failing", failing=["sync"])
    out = run_oracle("eval", "compare", old, failing, "--json", env=_env(tmp_path))
    assert out.returncode == 1, out.stderr
    body = json.loads(out.stdout)
    assert body["has_regression"] and body["regressions"] == []
    assert body["case_regressions"] == [{"suite": "rootcause", "case": "sync"}]
    assert run_oracle("eval", "compare", failing, old, env=_env(tmp_path)).returncode == 0  # a fix is no regression


def test_compare_exits_2_in_one_line_on_a_missing_report(tmp_path: Path) -> None:
    out = run_oracle("eval", "compare", _written(tmp_path, "a"), tmp_path / "nowhere", env=_env(tmp_path))
    assert out.returncode == 2
    assert "nowhere: no such folder" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    out = run_oracle("eval", "compare", tmp_path / "empty", _written(tmp_path, "a"), env=_env(tmp_path))
    assert out.returncode == 2 and "no report.json" in out.stderr


def test_eval_refuses_an_unknown_suite_or_a_missing_case_folder(tmp_path: Path) -> None:
    trace = tmp_path / "t"
    trace.mkdir()
    dump_case(Case("c", trace, ("Why is step 3 slow?",), Expect("none", 3)), tmp_path / "cases" / "c.yaml")
    out = run_oracle("eval", "--suite", "vibes", "--cases", tmp_path / "cases", env=_env(tmp_path))
    assert out.returncode == 2 and "unknown suite 'vibes'" in out.stderr, out.stderr
    out = run_oracle("eval", "--cases", tmp_path / "absent", "--report", tmp_path / "r", env=_env(tmp_path))
    assert out.returncode == 2 and "absent: not a folder of case files" in out.stderr, out.stderr
    assert not (tmp_path / "r").exists()


def test_make_cases_writes_the_default_set_that_eval_reads(tmp_path: Path) -> None:
    out = run_oracle("eval", "make-cases", tmp_path / "set", env=_env(tmp_path))  # about 15 s on 2 cores
    assert out.returncode == 0, out.stderr
    files = sorted(p.stem for p in (tmp_path / "set" / "cases").glob("*.yaml"))
    assert {"clean_s0", "synth_host_sync", "synth_pipeline_bubble"} <= set(files), files
    assert f"{len(files)} cases in" in out.stdout and "oracle eval --cases" in out.stdout
    assert any((tmp_path / "set" / "traces" / "synth_host_sync").iterdir())


def _cases(root: Path) -> list[Case]:
    cases = []
    for name, (inject, job, ranks, op) in JOBS.items():
        synthesize(root / "traces" / name, SynthConfig(steps=4, injections=(parse_injection(inject),), **job))  # type: ignore[arg-type]
        cases.append(Case(name, root / "traces" / name, ("Why is step 3 slow?",), Expect(name, 3, ranks, (op,)),
                          kind="synth"))
    return cases


@pytest.mark.slow  # about 50 s on 2 cores: two runs of the agent, each with its own FalkorDB server
def test_an_agent_with_a_detector_disabled_is_a_regression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = _cases(tmp_path)
    for case in cases:
        dump_case(case, tmp_path / "cases" / f"{case.id}.yaml")
    # the intact agent, as a user runs it
    try:
        out = run_oracle("eval", "--suite", "rootcause", "--cases", tmp_path / "cases", "--report", tmp_path / "old",
                         "--json", env=_env(tmp_path / "home_old"), timeout=600)
    finally:
        stop_server(tmp_path / "home_old")  # the process started it; left running, it would load later tests
    assert out.returncode == 0, out.stderr
    before = json.loads(out.stdout)
    assert before["rootcause"]["top1_accuracy"] == 1.0, before["rootcause"]["cases"]
    assert (tmp_path / "old" / "report.md").is_file() and (tmp_path / "old" / "confusion.png").is_file()
    # the same agent with the pipeline-bubble detector gone, in a fresh workspace (analyses are cached there)
    monkeypatch.setattr("bottleneck_oracle.findings.findings.pipeline_bubbles", lambda *args, **kwargs: [])
    home = tmp_path / "home_new"
    try:
        broken = run_suites(cases, Settings(home=home, workers=2), suites=("rootcause",))
    finally:
        stop_server(home)
    write_report(broken, tmp_path / "new", meta={"llm": "offline", "broken": "pipeline_bubbles disabled"})
    assert [c.case for c in broken["rootcause"].cases if not c.passed] == ["pipeline_bubble"]
    out = run_oracle("eval", "compare", tmp_path / "old", tmp_path / "new", env=_env(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "| rootcause | top1_accuracy | 1 | 0.5 |" in out.stdout
    assert "- rootcause: `pipeline_bubble`" in out.stdout
