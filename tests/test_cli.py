"""The ``oracle`` command line as users run it: a real process, real exit codes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bottleneck_oracle.cli import app
from tests.conftest import REAL
from tests.tracebuilder import op, write

DLRM = REAL / "param" / "dlrm_8rank_kineto"


def _oracle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bottleneck_oracle", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def dlrm_json() -> dict:
    out = _oracle("analyze", DLRM, "--json")
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
    out = _oracle("analyze", DLRM, "--json", "--rank", "3")
    assert [s["rank"] for s in json.loads(out.stdout)["steps"]] == [3]


def test_analyze_human_output_explains_the_slowest_step() -> None:
    out = _oracle("analyze", DLRM)
    assert out.returncode == 0
    assert "Why is step 10 slow?" in out.stdout and "straggler_rank" in out.stdout


def test_overlay_marks_the_critical_path(tmp_path: Path) -> None:
    path = tmp_path / "overlay.json.gz"
    out = _oracle("analyze", DLRM, "--overlay", path, "--step", "10", "--rank", "0")
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
    out = _oracle("analyze", bad)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.json" in lines[0] and reason in lines[0]
    assert "Traceback" not in out.stderr


def test_negative_duration_and_duplicate_rank_exit_2(tmp_path: Path) -> None:
    write(tmp_path / "neg" / "t.json.gz", [op("a", 0, -1)])
    assert _oracle("analyze", tmp_path / "neg").returncode == 2
    write(tmp_path / "dup" / "a.json.gz", [op("a", 0, 1)], rank=0, world=1)
    write(tmp_path / "dup" / "b.json.gz", [op("a", 0, 1)], rank=0, world=1)
    out = _oracle("analyze", tmp_path / "dup")
    assert out.returncode == 2 and "both claim rank 0" in out.stderr


def test_cli_flag_set_is_frozen() -> None:
    # a new flag is a decision: update this list on purpose
    import typer.main

    group = typer.main.get_command(app)
    flags = {name: sorted(p.name for p in cmd.params) for name, cmd in group.commands.items()}  # type: ignore[attr-defined]
    assert flags["analyze"] == ["as_json", "overlay", "partial", "paths", "rank", "step"]
    assert flags["capture"] == ["batch_size", "d_model", "inject", "layers", "microbatches", "out_dir",
                                "pipeline", "ranks", "seed", "seq_len", "steps", "whatif"]
    assert flags["ingest"] == ["as_json", "detail", "hops", "partial", "paths", "predict"]
    assert flags["traces"] == ["as_json"]
    assert flags["synth"] == ["dp", "hardware", "inject", "microbatches", "model", "out_dir", "pp", "ranks",
                              "seed", "steps", "tp", "whatif"]
    assert flags["train"] == ["data", "directed", "epochs", "hidden", "layers", "max_minutes",
                              "out", "patience", "refit_steps", "seed"]
    assert flags["gnn-eval"] == ["as_json", "checkpoint", "data", "plots", "record", "splits"]
    dataset = group.commands["dataset"].commands  # type: ignore[attr-defined]
    assert sorted(p.name for p in dataset["build"].params) == ["n", "out_dir", "seed"]
    db = group.commands["db"].commands  # type: ignore[attr-defined]
    assert {name: sorted(p.name for p in cmd.params) for name, cmd in db.items()} == \
        {"start": [], "stop": [], "status": ["as_json"]}


def test_execution_trace_alone_exits_2() -> None:
    out = _oracle("analyze", REAL / "hta" / "execution_trace" / "benchmark_simple_add_et.json.gz")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: benchmark_simple_add_et.json.gz: an execution trace holds no timings; pass it with its "
        "Kineto trace"
    ]


def test_execution_trace_with_its_kineto_trace(tmp_path: Path) -> None:
    out = _oracle("analyze", REAL / "hta" / "execution_trace", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["trace"]["ranks"] == [0]


def test_synth_writes_a_job_the_analysis_reads(tmp_path: Path) -> None:
    out = _oracle("synth", tmp_path / "job", "--model", "tiny", "--dp", "2", "--inject", "host_pause@3:1=30ms")
    assert out.returncode == 0, out.stderr
    assert "injected host_pause at step 3 on rank(s) 1" in out.stdout
    analysed = json.loads(_oracle("analyze", tmp_path / "job", "--json").stdout)
    assert {(f["category"], f["step"], tuple(f["ranks"])) for f in analysed["findings"]} >= {("host_pause", 3, (1,))}


def test_synth_whatif_writes_true_step_times_of_each_edit(tmp_path: Path) -> None:
    out = _oracle("synth", tmp_path / "job", "--model", "tiny", "--dp", "2", "--inject", "host_pause@2:1=30ms",
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
    out = _oracle("synth", tmp_path / "job", "--inject", "host_pause@2", "--whatif", edit)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "job").exists()


def test_synth_ranks_sets_the_data_parallel_degree(tmp_path: Path) -> None:
    out = _oracle("synth", tmp_path / "job", "--ranks", "4", "--tp", "2", "--steps", "2")
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "job" / "manifest.json").read_text())
    assert (manifest["config"]["dp"], manifest["config"]["tp"]) == (2, 2)
    assert sorted(p.name for p in (tmp_path / "job").glob("rank*.json.gz"))[-1].startswith("rank3.")


@pytest.mark.parametrize("args", [["--ranks", "6", "--tp", "4"], ["--ranks", "4", "--dp", "2", "--tp", "4"]])
def test_synth_ranks_that_do_not_fit_exit_2(tmp_path: Path, args: list[str]) -> None:
    out = _oracle("synth", tmp_path / "job", *args)
    assert out.returncode == 2 and "--ranks" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_synth_bad_injection_exits_2(tmp_path: Path) -> None:
    out = _oracle("synth", tmp_path / "job", "--pp", "1", "--inject", "pipeline_bubble@2")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
