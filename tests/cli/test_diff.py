"""``oracle diff`` as a user or a CI job runs it: the verdict, the formats, baselines, the gate's exit code."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bottleneck_oracle.cli.diff import GATE_EXIT
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.truth.injection import parse_injection
from tests.conftest import run_oracle

STEPS = 8


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 2-rank GPT job, the same job with other noise, and one with a 1.5 ms data-loading stall in
    every step (about +45%)."""
    root = tmp_path_factory.mktemp("diff")
    out = {}
    for name, seed, stall in (("base", 0, 0.0), ("again", 1, 0.0), ("stalled", 1, 1.5)):
        injections = tuple(parse_injection(f"dataloader_stall@{s}:0={stall}ms") for s in range(1, STEPS + 1)) if stall else ()
        synthesize(root / name, SynthConfig(model="tiny", dp=2, steps=STEPS, seed=seed, injections=injections))
        out[name] = root / name
    out["home"] = root / "home"
    return out


def _diff(runs: dict[str, Path], *args: object):  # type: ignore[no-untyped-def]
    return run_oracle("diff", *args, env={**os.environ, "ORACLE_HOME": str(runs["home"])})


def test_a_run_against_itself_is_unchanged_and_passes_the_gate(runs: dict[str, Path]) -> None:
    out = _diff(runs, runs["base"], runs["base"], "--gate", "1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("unchanged")


def test_a_slowed_run_fails_the_gate_with_its_own_exit_code(runs: dict[str, Path]) -> None:
    out = _diff(runs, runs["base"], runs["stalled"], "--gate", "5")
    assert out.returncode == GATE_EXIT, out.stderr
    assert "NEW is slower" in out.stdout and "gate" in out.stderr
    assert _diff(runs, runs["base"], runs["stalled"], "--gate", "90").returncode == 0  # a looser gate passes
    assert _diff(runs, runs["base"], runs["again"], "--gate", "5").returncode == 0  # noise alone passes


def test_json_is_one_document_a_pipeline_reads(runs: dict[str, Path]) -> None:
    out = _diff(runs, runs["base"], runs["stalled"], "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "slower" and doc["delta_ms"] > 1.2 and doc["confidence"] >= 0.95
    assert doc["moved"]["categories"][0]["category"] == "data_loading"
    assert doc["base_trace"]["name"] == "base" and doc["new_trace"]["name"] == "stalled"
    assert set(doc["comparability"]) >= {"level", "reasons", "op_similarity"}


def test_markdown_is_a_report_for_a_pull_request(runs: dict[str, Path]) -> None:
    out = _diff(runs, runs["base"], runs["stalled"], "--format", "markdown")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("### oracle diff: NEW is slower")
    assert "| what | name | base ms | new ms | change ms |" in lines
    assert any(line.startswith("| Critical-path attribution | `data_loading` |") for line in lines)


def test_a_saved_baseline_is_compared_against(runs: dict[str, Path]) -> None:
    saved = _diff(runs, runs["base"], "--save-baseline", "main")
    assert saved.returncode == 0, saved.stderr
    out = _diff(runs, runs["stalled"], "--against", "main", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["base_trace"]["name"] == "base"
    by_name = _diff(runs, "baseline:main", runs["base"])
    assert by_name.returncode == 0 and by_name.stdout.startswith("unchanged")


@pytest.mark.parametrize("args, says", [
    (("--against", "nightly"), "baseline 'nightly': not saved"),
    (("a-trace-that-is-not-there",), "takes BASE and NEW"),
])
def test_bad_input_is_one_line_and_exit_2(runs: dict[str, Path], args: tuple[str, ...], says: str) -> None:
    out = _diff(runs, *((runs["base"],) if args[0] == "--against" else ()), *args)
    assert out.returncode == 2
    assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_the_text_report_fits_80_columns_with_names_cut_in_the_middle(runs: dict[str, Path]) -> None:
    env = {**os.environ, "ORACLE_HOME": str(runs["home"]), "COLUMNS": "80"}
    text = run_oracle("diff", runs["base"], runs["stalled"], env=env).stdout
    lines = text.splitlines()
    assert lines and max(map(len, lines)) <= 80
    moved = json.loads(_diff(runs, runs["base"], runs["stalled"], "--format", "json").stdout)["moved"]
    names = {r["op"] for key in ("ops", "critical_path") for r in moved.get(key, [])}
    cut = [line for line in lines if "…" in line and line.split()[-1].startswith(("+", "-"))]  # table rows
    assert cut  # the tiny GPT's multi_tensor_apply kernels have names of 200 characters
    for line in cut:
        head, tail = line.rsplit(None, 3)[0].split("…")
        assert any(n.startswith(head) and n.endswith(tail) for n in names), line
    for r in moved["critical_path"][:5]:  # every number whole
        assert f"{r['new_ms']:.3f}" in text


def test_the_report_names_the_edit_that_takes_the_slow_run_to_the_fast_one(runs: dict[str, Path]) -> None:
    out = _diff(runs, runs["base"], runs["stalled"], "--format", "json")
    w = json.loads(out.stdout)["whatif"]
    assert w["applied_to"] == "new" and w["edit"] == "fix dataloader_stall", w
    markdown = _diff(runs, runs["base"], runs["stalled"], "--format", "markdown").stdout
    assert f"- what-if: `fix dataloader_stall` applied to NEW (stalled) predicts {w['predicted_ms']:g} ms" in markdown
    back = _diff(runs, runs["stalled"], runs["base"])
    assert "what-if: `fix dataloader_stall` applied to BASE (stalled)" in back.stdout
