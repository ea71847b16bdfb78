"""``oracle whatif`` and ``oracle optimize`` as users run them: real processes, real exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, run_oracle
from tests.whatif.cases import fault

GPT = REPO / "examples" / "gpt_2rank"


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "ORACLE_HOME": str(home), "ORACLE_WORKERS": "1"}


def test_whatif_json_has_the_documented_shape(tmp_path: Path) -> None:
    out = run_oracle("whatif", GPT, "--edit", "scale op=gemm x2", "--edit", "fix straggler_rank", "--json",
                     env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert set(body) == {"step", "baseline_ms", "edits", "predicted_ms", "chosen", "why", "assumptions",
                         "critical_path", "new_critical_path", "moved", "interval_ms", "interval_from",
                         "model_familiarity"}
    assert body["step"] == 5 and [e["text"] for e in body["edits"]] == ["scale op=gemm x2", "fix straggler_rank"]
    # a real CPU capture is unlike the simulated jobs the graph model learned: it abstains
    assert set(body["predicted_ms"]) == {"replay"} and body["chosen"] == "replay"
    assert body["model_familiarity"]["known"] is False
    assert body["predicted_ms"][body["chosen"]] < body["baseline_ms"] - 100  # the straggler's 146 ms and more
    assert body["moved"]["breakdown_delta_ms"]["idle"] < -100



def test_whatif_json_is_the_same_in_every_process(tmp_path: Path) -> None:
    # the moved ops of ddp_finalize_wait tie at 0.1 ms; their order once followed the process's string hashes
    outs = {run_oracle("whatif", REPO / "tests/data/ddp_finalize_wait", "--edit", "scale op=gemm x2", "--no-model",
                       "--json", env={**_env(tmp_path), "PYTHONHASHSEED": seed}).stdout for seed in ("0", "1", "2")}
    assert len(outs) == 1 and json.loads(outs.pop())["moved"]["changed"]

def test_whatif_prints_the_prediction_for_a_person_and_finds_the_trace_by_name(tmp_path: Path) -> None:
    assert run_oracle("whatif", GPT, "--edit", "fix host_pause", "--no-model", env=_env(tmp_path)).returncode == 0
    out = run_oracle("whatif", "gpt_2rank", "--edit", "fix host_pause", "--step", "5", "--no-model",
                     env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "step 5 with fix host_pause:" in out.stdout and "ms saved" in out.stdout and "assumes:" in out.stdout


@pytest.mark.parametrize("args,message", [
    (("--edit", "scale op=gemm x0"), "edit 'scale op=gemm x0': the number must be positive"),
    (("--edit", "scale op=conv x2"), "unknown op class"),
    (("--edit", "scale op=gemm x2", "--step", "42"), "step 42: no such complete step"),
    (("--edit", "fix checkpoint_stall"), "step 5 has no checkpoint_stall finding to fix"),
    (("--edit", "microbatches=8"), "the trace has no pipeline stages"),
])
def test_bad_edits_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = run_oracle("whatif", GPT, *args, "--no-model", env=_env(tmp_path))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_an_unknown_trace_exits_2(tmp_path: Path) -> None:
    out = run_oracle("optimize", "no_such_trace", env=_env(tmp_path))
    assert out.returncode == 2 and "trace 'no_such_trace': not a path" in out.stderr


def test_optimize_json_ranks_the_fix_first_and_verify_measures_it(tmp_path: Path) -> None:
    folder, _ = fault("checkpoint_stall")
    out = run_oracle("optimize", folder, "--verify", "--json", "--no-model", env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert set(body) >= {"step", "baseline_ms", "candidates", "plan"}
    first = body["candidates"][0]
    assert first["edit"] == "fix checkpoint_stall step=2" and first["gain_ms"] > 0
    step = body["plan"][0]
    assert step["edit"] == first["edit"] and abs(step["error_pct"]) < 2


def test_optimize_prints_a_table_and_the_plan(tmp_path: Path) -> None:
    out = run_oracle("optimize", GPT, "--budget", "1", "--no-model", env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "candidates, best first" in out.stdout and "1. fix " in out.stdout
    narrow = run_oracle("optimize", GPT, "--budget", "1", "--no-model", env={**_env(tmp_path), "COLUMNS": "80"})
    assert max(map(len, narrow.stdout.splitlines())) <= 80
    plan = json.loads(run_oracle("optimize", GPT, "--budget", "1", "--no-model", "--json", env=_env(tmp_path)).stdout)
    best = plan["candidates"][0]  # its numbers whole in the table, not cut to fit
    assert f"{best['predicted_ms']:.3f}" in narrow.stdout and f"{best['gain_ms']:.3f}" in narrow.stdout
    out = run_oracle("optimize", GPT, "--budget", "0", "--no-model", env=_env(tmp_path))
    assert out.returncode == 2 and "the budget must be at least 1" in out.stderr
