"""Tests for traces/capture.py: real 2-rank captures, injection parsing, config checks, the launcher."""

from __future__ import annotations

import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bottleneck_oracle.errors import CaptureError, ConfigError, TraceFormatError
from bottleneck_oracle.traces.capture import (
    CaptureConfig,
    Injection,
    Manifest,
    capture,
    load_manifest,
    parse_injection,
)


Trace = dict[str, Any]
STRAGGLER_MS = 200.0
TINY: dict[str, Any] = {
    "layers": 1, "d_model": 64, "heads": 4, "seq_len": 32, "batch_size": 4, "vocab": 256, "timeout_s": 120
}
STRAGGLER_CONFIG = CaptureConfig(
    ranks=2, steps=6, injections=(parse_injection(f"straggler_rank@4:1={STRAGGLER_MS:g}ms"),), **TINY
)
MIXED_CONFIG = CaptureConfig(
    ranks=2,
    steps=5,
    injections=tuple(
        parse_injection(text)
        for text in (
            "host_pause@2:0=120ms",
            "dataloader_stall@3:1=120ms",
            "slow_compute@4:0=4x",
            "exposed_communication@5=8MB",
            "checkpoint_stall@6:1=2MB",
        )
    ),
    **TINY,
)


def _read(path: Path) -> Trace:
    with gzip.open(path, "rt") as file:
        trace: Trace = json.load(file)
    return trace


def _step_window(trace: Trace, step: int) -> tuple[float, float, int]:
    """(start us, end us, thread id) of `ProfilerStep#step`."""
    (event,) = [e for e in trace["traceEvents"] if e.get("name") == f"ProfilerStep#{step}"]
    return event["ts"], event["ts"] + event["dur"], event["tid"]


def _events_in_step(trace: Trace, step: int, name: str) -> list[dict[str, Any]]:
    start, end, _ = _step_window(trace, step)
    events = trace["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e["name"] == name and start <= e["ts"] < end]


def _longest_gap_ms(trace: Trace, step: int) -> float:
    """Longest stretch of the step's own thread covered by no event inside the step."""
    start, end, tid = _step_window(trace, step)
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and e["tid"] == tid and start < e["ts"] < end
    )
    longest, covered = 0.0, start
    for span_start, span_end in spans:
        longest = max(longest, span_start - covered)
        covered = max(covered, span_end)
    return max(longest, end - covered) / 1e3


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    pytest.importorskip("torch")
    out_dir = tmp_path_factory.mktemp("straggler")
    return out_dir, capture(out_dir, STRAGGLER_CONFIG)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    pytest.importorskip("torch")
    out_dir = tmp_path_factory.mktemp("mixed")
    return out_dir, capture(out_dir, MIXED_CONFIG)


@pytest.mark.slow
def test_capture_writes_one_gzipped_kineto_trace_per_rank(straggler: tuple[Path, Manifest]) -> None:
    out_dir, manifest = straggler
    assert manifest.traces == ("rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz")
    for rank, name in enumerate(manifest.traces):
        assert (out_dir / name).read_bytes()[:2] == b"\x1f\x8b"  # gzip magic
        trace = _read(out_dir / name)
        steps = {e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}
        assert steps == {f"ProfilerStep#{n}" for n in range(2, 8)}
        assert trace["distributedInfo"]["rank"] == rank
        assert trace["distributedInfo"]["world_size"] == 2
        names = {e.get("name") for e in trace["traceEvents"]}
        assert "gloo:all_reduce" in names
        assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in names


@pytest.mark.slow
def test_capture_manifest_records_injection_and_step_times(straggler: tuple[Path, Manifest]) -> None:
    out_dir, manifest = straggler
    (truth,) = manifest.ground_truth
    assert (truth.category, truth.step, truth.ranks, truth.unit) == ("straggler_rank", 4, (1,), "ms")
    assert truth.injected_ms == STRAGGLER_MS
    assert set(manifest.step_wall_ms) == {0, 1}
    assert all(set(steps) == set(range(2, 8)) for steps in manifest.step_wall_ms.values())
    assert load_manifest(out_dir) == manifest
    assert load_manifest(out_dir / "manifest.json").config == STRAGGLER_CONFIG


@pytest.mark.slow
def test_capture_straggler_step_is_longer_by_the_sleep(straggler: tuple[Path, Manifest]) -> None:
    out_dir, manifest = straggler
    wall_ms = manifest.step_wall_ms[1]
    extra_ms = wall_ms[4] - statistics.median(ms for step, ms in wall_ms.items() if step != 4)
    # On a busy two-core machine the other rank runs faster while this one sleeps, so allow slack.
    assert 0.6 * STRAGGLER_MS < extra_ms < 1.6 * STRAGGLER_MS
    rank0 = _read(out_dir / manifest.traces[0])
    waits = [e["dur"] / 1e3 for e in _events_in_step(rank0, 4, "gloo:all_reduce")]
    assert max(waits) > 0.5 * STRAGGLER_MS  # rank 0 waits in the DDP all-reduce


@pytest.mark.slow
def test_capture_injections_land_in_their_step_and_rank(mixed: tuple[Path, Manifest]) -> None:
    out_dir, manifest = mixed
    rank0, rank1 = (_read(out_dir / name) for name in manifest.traces)
    assert _longest_gap_ms(rank0, 2) > 110  # host_pause: an uncovered gap
    fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert _events_in_step(rank1, 3, fetch)[0]["dur"] / 1e3 > 110
    addmm = [len(_events_in_step(rank0, step, "aten::addmm")) for step in (4, 5)]
    assert addmm[0] > addmm[1]  # slow_compute repeats the MLP matmuls
    reduces = _events_in_step(rank1, 5, "gloo:all_reduce")
    assert [e["args"]["Input Dims"] for e in reduces].count([[2 * 1024**2]]) == 1  # 8 MB of float32
    assert len(_events_in_step(rank1, 6, "checkpoint_save")) == 1
    assert not _events_in_step(rank0, 6, "checkpoint_save")
    truths = {truth.category: truth for truth in manifest.ground_truth}
    assert truths["exposed_communication"].ranks == (0, 1)
    assert all(truth.injected_ms is not None and truth.injected_ms > 0 for truth in truths.values())


@pytest.mark.slow
def test_capture_single_rank(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    manifest = capture(tmp_path, CaptureConfig(ranks=1, steps=2, **TINY))
    trace = _read(tmp_path / "rank0.pt.trace.json.gz")
    assert trace["distributedInfo"]["world_size"] == 1
    assert set(manifest.step_wall_ms[0]) == {2, 3}


def test_capture_refuses_traces_of_other_ranks(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "rank5.pt.trace.json.gz").write_bytes(b"")
    with pytest.raises(ConfigError) as caught:
        capture(tmp_path, CaptureConfig(ranks=2, **TINY))
    assert "rank5.pt.trace.json.gz" in str(caught.value)


def test_capture_parse_injection_refuses_what_a_capture_cannot_inject() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_injection("pipeline_bubble@3")
    assert "unknown category 'pipeline_bubble'" in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"injections": (Injection("host_pause", 1),)}, "ProfilerStep#2 to #9 are"),
        ({"injections": (Injection("host_pause", 3, (2,)),)}, "rank 2 >= ranks (2)"),
        ({"injections": (Injection("exposed_communication", 3, (1,)),)}, "drop the rank list"),
        (
            {"injections": (Injection("host_pause", 3), Injection("host_pause", 3, (1,)))},
            "same step and rank",
        ),
        ({"heads": 3}, "heads (3) must divide d_model (128)"),
        ({"steps": 0}, "steps must be positive"),
    ],
)
def test_capture_config_rejects(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        CaptureConfig(**changes)
    assert message in str(caught.value)


def test_capture_config_resolves_ranks_and_sizes() -> None:
    injections = (Injection("host_pause", 4), Injection("slow_compute", 5, (2,), 3))
    config = CaptureConfig(ranks=3, injections=injections)
    assert config.recorded_steps == range(2, 10)
    assert config.resolved_injections() == (
        Injection("host_pause", 4, (0, 1, 2), 150.0),
        Injection("slow_compute", 5, (2,), 3.0),
    )


def test_load_manifest_rejects_other_files(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"format": 1, "config": {}}')
    with pytest.raises(TraceFormatError) as caught:
        load_manifest(tmp_path)
    assert "not a capture manifest" in str(caught.value)
    with pytest.raises(TraceFormatError) as missing:
        load_manifest(tmp_path / "nowhere.json")
    assert "cannot read the manifest" in str(missing.value)


def test_launch_reports_the_failing_rank_and_stops_the_others(tmp_path: Path) -> None:
    _gpt = pytest.importorskip("bottleneck_oracle.traces._gpt")
    pid_file = tmp_path / "pid"
    waiter = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    failer = "import time; time.sleep(0.5); raise ValueError('boom')"
    start = time.monotonic()
    with pytest.raises(CaptureError) as caught:
        _gpt.launch([[sys.executable, "-c", waiter], [sys.executable, "-c", failer]], 60, tmp_path)
    assert time.monotonic() - start < 30
    assert str(caught.value) == "capture failed on rank 1 (exit code 1): ValueError: boom"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_launch_times_out(tmp_path: Path) -> None:
    _gpt = pytest.importorskip("bottleneck_oracle.traces._gpt")
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(CaptureError) as caught:
        _gpt.launch([sleeper, sleeper], 1, tmp_path)
    assert str(caught.value) == "capture timed out after 1 s; ranks [0, 1] still running"
