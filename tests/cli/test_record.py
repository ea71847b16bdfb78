"""``oracle synth`` as users run it: a real process, real files, real exit codes (``oracle capture``
runs in tests/capture, where the real captures are timed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_oracle


def test_synth_writes_a_job_the_analysis_reads(tmp_path: Path) -> None:
    out = run_oracle("synth", tmp_path / "job", "--model", "tiny", "--dp", "2", "--inject", "host_pause@3:1=30ms")
    assert out.returncode == 0, out.stderr
    assert "injected host_pause at step 3 on rank(s) 1" in out.stdout
    analysed = json.loads(run_oracle("analyze", tmp_path / "job", "--json").stdout)
    assert {(f["category"], f["step"], tuple(f["ranks"])) for f in analysed["findings"]} >= {("host_pause", 3, (1,))}


def test_synth_whatif_writes_true_step_times_of_each_edit(tmp_path: Path) -> None:
    out = run_oracle("synth", tmp_path / "job", "--model", "tiny", "--dp", "2", "--inject", "host_pause@2:1=30ms",
                  "--whatif", "remove_injection", "--whatif", "data_parallel=4")
    assert out.returncode == 0, out.stderr
    assert "what if remove_injection:" in out.stdout and "what if data_parallel=4:" in out.stdout
    removed, wider = json.loads((tmp_path / "job" / "whatif.json").read_text())["edits"]
    assert removed["edit"]["kind"] == "remove_injection" and wider["edit"]["value"] == 4
    stalled = {(s, r): (before, after) for s, r, before, after in removed["step_ms"]}
    before, after = stalled[(2, 1)]
    assert before - after == pytest.approx(30, abs=3)  # the pause is gone, nothing else changed
    assert {r for _, r, _, _ in wider["step_ms"]} == {0, 1, 2, 3}
    assert all(b is None for _, r, b, _ in wider["step_ms"] if r >= 2)  # those ranks exist only after


@pytest.mark.parametrize("edit", ["faster=2", "data_parallel", "remove_injection=5"])
def test_synth_bad_whatif_exits_2_before_writing(tmp_path: Path, edit: str) -> None:
    out = run_oracle("synth", tmp_path / "job", "--inject", "host_pause@2", "--whatif", edit)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "job").exists()


def test_synth_ranks_sets_the_data_parallel_degree(tmp_path: Path) -> None:
    out = run_oracle("synth", tmp_path / "job", "--ranks", "4", "--tp", "2", "--steps", "2")
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "job" / "manifest.json").read_text())
    assert (manifest["config"]["dp"], manifest["config"]["tp"]) == (2, 2)
    assert sorted(p.name for p in (tmp_path / "job").glob("rank*.json.gz"))[-1].startswith("rank3.")


@pytest.mark.parametrize("args", [["--ranks", "6", "--tp", "4"], ["--ranks", "4", "--dp", "2", "--tp", "4"]])
def test_synth_ranks_that_do_not_fit_exit_2(tmp_path: Path, args: list[str]) -> None:
    out = run_oracle("synth", tmp_path / "job", *args)
    assert out.returncode == 2 and "--ranks" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_synth_bad_injection_exits_2(tmp_path: Path) -> None:
    out = run_oracle("synth", tmp_path / "job", "--pp", "1", "--inject", "pipeline_bubble@2")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
