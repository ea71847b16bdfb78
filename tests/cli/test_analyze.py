"""``oracle analyze`` as users run it: a real process, real exit codes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import REAL, run_oracle
from tests.tracebuilder import op, write

DLRM = REAL / "param" / "dlrm_8rank_kineto"


@pytest.fixture(scope="module")
def dlrm_json() -> dict:
    out = run_oracle("analyze", DLRM, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_analyze_json_has_the_documented_shape(dlrm_json: dict) -> None:
    assert set(dlrm_json) == {"trace", "steps", "slow_steps", "findings"}
    assert dlrm_json["trace"]["ranks"] == list(range(8))
    steps = dlrm_json["steps"]
    assert [(s["step"], s["rank"]) for s in steps] == [(10, r) for r in range(8)]
    for s in steps:
        assert {"step", "rank", "wall_ms", "critical_path_ms", "breakdown_ms", "critical_path"} <= set(s)
        assert sum(s["breakdown_ms"].values()) == pytest.approx(s["wall_ms"], abs=0.01)
        entry = s["critical_path"][0]
        assert {"name", "kind", "rank", "ts_us", "dur_us", "contrib_us"} <= set(entry)
    finding = next(f for f in dlrm_json["findings"] if f["category"] == "straggler_rank")
    assert {"category", "step", "ranks", "ops", "impact_ms", "evidence"} <= set(finding)
    assert finding["ranks"] == [7] and finding["step"] == 10


def test_analyze_json_ts_are_the_files_timestamps(dlrm_json: dict) -> None:
    doc = json.loads(gzip.decompress(next(DLRM.glob("worker0_*")).read_bytes()))
    file_ts = {e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X"}
    rank0 = next(s for s in dlrm_json["steps"] if s["rank"] == 0)
    own = [e for e in rank0["critical_path"] if e["rank"] == 0 and e["kind"] != "gap"]
    assert own and all(e["ts_us"] in file_ts for e in own)


def test_analyze_filters_by_step_and_rank() -> None:
    out = run_oracle("analyze", DLRM, "--json", "--rank", "3")
    assert [s["rank"] for s in json.loads(out.stdout)["steps"]] == [3]


def test_analyze_human_output_explains_the_slowest_step() -> None:
    out = run_oracle("analyze", DLRM)
    assert out.returncode == 0
    assert "Why is step 10 slow?" in out.stdout and "straggler_rank" in out.stdout


def test_overlay_marks_the_critical_path(tmp_path: Path) -> None:
    path = tmp_path / "overlay.json.gz"
    out = run_oracle("analyze", DLRM, "--overlay", path, "--step", "10", "--rank", "0")
    assert out.returncode == 0, out.stderr
    doc = json.loads(gzip.decompress(path.read_bytes()))
    critical = [e for e in doc["traceEvents"] if e.get("args", {}).get("critical")]
    flows = [e for e in doc["traceEvents"] if e.get("cat") == "critical_path"]
    assert critical and len(flows) == 2 * (len(flows) // 2) and flows
    assert {e["pid"] for e in critical} >= {0, 14}  # rank 0's CPU and the late rank 7's CPU
    assert all(e["args"]["contrib_us"] > 0 for e in critical)


@pytest.mark.parametrize("content,reason", [
    (b"\x1f\x8b\x08\x00\x00", "truncated or corrupt gzip"),
    (b'{"traceEvents": [{"ph": "X", ', "truncated JSON"),
    (b'{"hello": "world"}', "neither a profiler trace"),
])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: bytes, reason: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    out = run_oracle("analyze", bad)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.json" in lines[0] and reason in lines[0]
    assert "Traceback" not in out.stderr


def test_negative_duration_and_duplicate_rank_exit_2(tmp_path: Path) -> None:
    write(tmp_path / "neg" / "t.json.gz", [op("a", 0, -1)])
    assert run_oracle("analyze", tmp_path / "neg").returncode == 2
    write(tmp_path / "dup" / "a.json.gz", [op("a", 0, 1)], rank=0, world=1)
    write(tmp_path / "dup" / "b.json.gz", [op("a", 0, 1)], rank=0, world=1)
    out = run_oracle("analyze", tmp_path / "dup")
    assert out.returncode == 2 and "both claim rank 0" in out.stderr


def test_execution_trace_alone_exits_2() -> None:
    out = run_oracle("analyze", REAL / "hta" / "execution_trace" / "benchmark_simple_add_et.json.gz")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: benchmark_simple_add_et.json.gz: an execution trace holds no timings; pass it with its "
        "Kineto trace"
    ]


def test_execution_trace_with_its_kineto_trace(tmp_path: Path) -> None:
    out = run_oracle("analyze", REAL / "hta" / "execution_trace", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["trace"]["ranks"] == [0]
