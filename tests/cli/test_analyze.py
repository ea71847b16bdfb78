"""``oracle analyze`` as users run it: a real process, real exit codes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
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
    assert set(dlrm_json) == {"trace", "gpu_timeline", "gpu_bound", "steps", "slow_steps", "findings", "run_verdict"}
    assert dlrm_json["run_verdict"]["verdict"].endswith("-bound") or dlrm_json["run_verdict"]["verdict"] == "untraced"
    assert dlrm_json["trace"]["ranks"] == list(range(8))
    assert [t["rank"] for t in dlrm_json["gpu_timeline"]] == list(range(8))
    for t in dlrm_json["gpu_timeline"]:
        assert t["busy_ms"] + t["idle_ms"] == pytest.approx(t["total_ms"], abs=1e-5)
        assert 0 < t["busy_ms"] <= t["total_ms"] and t["exposed_comm_ms"] <= t["comm_ms"]
    steps = dlrm_json["steps"]
    assert [(s["step"], s["rank"]) for s in steps] == [(10, r) for r in range(8)]
    for s in steps:
        assert {"step", "rank", "wall_ms", "critical_path_ms", "critical_path_len", "breakdown_ms",
                "top_contributors"} <= set(s) and "critical_path" not in s  # whole paths behind --full-paths
        assert sum(s["breakdown_ms"].values()) == pytest.approx(s["wall_ms"], abs=0.01)
        assert 0 <= s["untraced_wait_ms"] <= s["breakdown_ms"]["idle"]
        assert (s["end_us"] - s["start_us"]) / 1000 == pytest.approx(s["wall_ms"], abs=0.002)
        assert s["gpu"]["total_ms"] == pytest.approx(s["wall_ms"], abs=0.002) and s["gpu"]["comm_ms"] > 0
        top = s["top_contributors"]
        assert 0 < len(top) <= min(10, s["critical_path_len"])
        assert {"name", "kind", "rank", "ts_us", "dur_us", "contrib_us"} <= set(top[0])
        assert [e["contrib_us"] for e in top] == sorted((e["contrib_us"] for e in top), reverse=True)
    finding = next(f for f in dlrm_json["findings"] if f["category"] == "straggler_rank")
    assert {"category", "step", "ranks", "ops", "impact_ms", "evidence"} <= set(finding)
    assert finding["ranks"] == [7] and finding["step"] == 10


def test_full_paths_are_columns_whose_largest_are_the_top_contributors(dlrm_json: dict) -> None:
    out = run_oracle("analyze", DLRM, "--json", "--full-paths")
    assert out.returncode == 0, out.stderr
    for s, brief in zip(json.loads(out.stdout)["steps"], dlrm_json["steps"]):
        path = s["critical_path"]
        assert set(path) == {"name", "kind", "category", "rank", "ts_us", "dur_us", "contrib_us"}
        assert all(len(column) == s["critical_path_len"] for column in path.values())
        assert sum(path["contrib_us"]) / 1000 == pytest.approx(s["wall_ms"], abs=1e-3)
        largest = sorted(path["contrib_us"], reverse=True)[:len(brief["top_contributors"])]
        assert [e["contrib_us"] for e in brief["top_contributors"]] == pytest.approx(largest, abs=1e-3)
    assert len(out.stdout) > 5 * len(json.dumps(dlrm_json))


def test_analyze_json_ts_are_the_files_timestamps() -> None:
    doc = json.loads(gzip.decompress(next(DLRM.glob("worker0_*")).read_bytes()))
    file_ts = {e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X"}
    rank0 = next(s for s in json.loads(run_oracle("analyze", DLRM, "--json", "--full-paths", "--rank", "0").stdout)
                 ["steps"])
    path = rank0["critical_path"]
    own = [ts for ts, r, kind in zip(path["ts_us"], path["rank"], path["kind"]) if r == 0 and kind != "gap"]
    assert own and all(ts in file_ts for ts in own)
    top = [e["ts_us"] for e in rank0["top_contributors"] if e["rank"] == 0 and e["kind"] != "gap"]
    assert top and all(ts in file_ts for ts in top)


def test_analyze_filters_by_step_and_rank() -> None:
    out = run_oracle("analyze", DLRM, "--json", "--rank", "3")
    assert [s["rank"] for s in json.loads(out.stdout)["steps"]] == [3]


def test_a_gpu_waiting_for_what_the_trace_does_not_show_names_no_bottleneck() -> None:
    trace = REAL / "hta" / "trace_compare_base"  # real: GPU work waits 100+ ms after its launch on an idle stream
    data = json.loads(run_oracle("analyze", trace, "--json").stdout)
    waits = {s["step"]: s["untraced_wait_ms"] for s in data["steps"]}
    # step 1009's window opens at its CPU start: the work its stream ran 11-157 ms in lost its launch records
    assert waits[1010] > 100 and waits[1009] > 100 and data["findings"] == []
    note = next(n["message"] for n in data["trace"]["health"] if n["code"] == "untraced_wait")
    assert f"GPU work waited {max(waits.values()):.3f} ms" in note and "2 steps in all" in note
    out = run_oracle("analyze", trace)
    assert out.returncode == 0 and "No bottleneck found in what the trace shows" in out.stdout
    assert "no category dominates" not in out.stdout  # idle does dominate: the GPU waited for the unseen


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


GPT = Path(__file__).resolve().parents[2] / "examples" / "gpt_2rank"


def _at_columns(columns: int, *args: object, **env: str) -> subprocess.CompletedProcess[str]:
    return run_oracle("analyze", *args, env={**os.environ, "COLUMNS": str(columns), **env})


def test_human_output_fits_80_columns_with_one_line_findings() -> None:
    out = _at_columns(80, GPT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "\x1b" not in out.stdout + out.stderr  # piped: no colour, no spinner
    data = json.loads(run_oracle("analyze", GPT, "--json").stdout)
    major = [f for f in data["findings"] if f["severity"] == "major"]
    assert major
    first = {}  # one line per category and step: the largest finding's, naming every rank
    causes = {f["step"]: f for f in major if f.get("cause")}
    for f in major:  # but a cause's own lateness and the others' waits for it are listed under it
        cause = causes.get(f["step"])
        if cause is None or f is cause or f["category"] not in ("pipeline_bubble", "exposed_communication"):
            first.setdefault((f["category"], f["step"]), f)
    for f in first.values():  # its line names the category, step, rank and impact; one evidence line beneath
        head = next(i for i, line in enumerate(lines)
                    if f["category"] in line and f"step {f['step']}" in line and f"{f['impact_ms']:.1f} ms" in line)
        evidence = lines[head + 1].strip()
        assert evidence and evidence in f["evidence"].replace("(python) ", "") or evidence.endswith("…")
        after = lines[head + 2]  # the next finding, not more evidence (a cause may list the waits it made)
        assert not after.startswith(" " * 14) or after.strip().startswith("+ the waits it made")


def test_verbose_gives_the_whole_evidence() -> None:
    out = _at_columns(80, GPT, "--verbose")
    data = json.loads(run_oracle("analyze", GPT, "--json").stdout)
    flat = " ".join(out.stdout.split())  # wrapped to the terminal
    assert all(" ".join(f["evidence"].split()) in flat for f in data["findings"][:3])
    assert max(map(len, out.stdout.splitlines())) <= 80
    short = _at_columns(200, GPT).stdout
    assert not any(f["evidence"] in short for f in data["findings"])


def test_steps_table_and_why_fit_80_and_120_columns() -> None:
    for columns in (80, 120):
        out = _at_columns(columns, DLRM)
        assert out.returncode == 0, out.stderr
        assert max(map(len, out.stdout.splitlines())) <= columns
        assert "Why is step 10 slow?" in out.stdout and "GPU per rank" in out.stdout


def test_long_op_names_are_cut_in_the_middle_and_whole_in_json() -> None:
    data = json.loads(run_oracle("analyze", DLRM, "--json").stdout)
    names = {e["name"] for s in data["steps"] for e in s["top_contributors"]}
    long = [n for n in names if len(n) > 40]
    assert long  # DLRM's autograd and DataLoader frames
    text = _at_columns(80, DLRM).stdout
    shortened = [line.split("  ")[-1] for line in text.splitlines() if "…" in line and "rank " in line]
    assert shortened
    for cut in shortened:
        head, tail = cut.strip().split("…")
        assert any(n.startswith(head) and n.endswith(tail) for n in long), cut


def _on_a_terminal(*args: str, **env: str) -> bytes:
    """stdout of ``oracle ARGS`` written to a pseudo-terminal (stderr piped)."""
    import pty

    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "bottleneck_oracle", *args], stdout=child,
                            stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "80", **env})
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(main)
    assert proc.returncode == 0
    return out


def test_no_color_on_a_terminal_gives_no_escape_codes() -> None:
    styled = _on_a_terminal("analyze", str(GPT))
    assert b"\x1b[" in styled  # the check can fail: on a terminal the titles are bold
    plain = _on_a_terminal("analyze", str(GPT), NO_COLOR="1")
    assert b"\x1b" not in plain and b"Why is step 5 slow?" in plain


def test_a_cause_leads_its_step_with_the_waits_it_made_beneath(tmp_path: Path) -> None:
    # rank 1 of 8 (dp 2 x tp 2 x pp 2) starts step 2 40 ms late: every rank's GPU then idles for it
    job = tmp_path / "job"
    made = run_oracle("synth", job, "--model", "tiny", "--dp", "2", "--tp", "2", "--pp", "2",
                      "--microbatches", "2", "--inject", "straggler_rank@2:1=40ms")
    assert made.returncode == 0, made.stderr
    data = json.loads(run_oracle("analyze", job, "--json").stdout)
    step2 = [f for f in data["findings"] if f["step"] == 2]
    assert step2[0]["cause"] and step2[0]["ranks"] == [1]
    bubbles = {r for f in step2 if f["category"] == "pipeline_bubble" for r in f["ranks"]}
    assert bubbles == set(range(8))
    text = " ".join(_at_columns(200, job).stdout.split())
    findings = text[text.index("Findings"):text.index("Why is")]
    assert findings.split(" ms ", 1)[1].startswith(f"{step2[0]['category']} step 2 rank 1 ")
    assert "+ the waits it made (-v: each): pipeline_bubble on ranks 0-7" in findings
    assert findings.count("pipeline_bubble") == 1 and findings.count("straggler_rank") == 1
    chronic = [f for f in data["findings"] if f["step"] is None and f["category"] == "launch_overhead"]
    if len(chronic) > 1:  # one line for a finding on several ranks
        assert findings.count("launch_overhead") == 1
