"""Tests for capture/capture.py: real 2-rank DDP and pipeline captures, injection parsing, config checks, the launcher."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bottleneck_oracle.capture.capture import Manifest, capture, load_manifest
from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
from bottleneck_oracle.errors import CaptureError, ConfigError, TraceFormatError
from bottleneck_oracle.traces import read_trace
from tests.capture.profiler_json import Trace, events_in_step, longest_gap_ms, read_json, step_window
from tests.conftest import DATA

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
    execution_trace=True,
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
MICROBATCHES = 4
PIPELINE_CONFIG = CaptureConfig(ranks=2, steps=3, pipeline=2, microbatches=MICROBATCHES, execution_trace=True,
                                **{**TINY, "layers": 2})
# 1F1B on two stages: stage 0 runs one warm-up forward, stage 1 none
ONE_F_ONE_B = {
    0: ["forward mb0", "forward mb1", "backward mb0", "forward mb2", "backward mb1", "forward mb3",
        "backward mb2", "backward mb3"],
    1: ["forward mb0", "backward mb0", "forward mb1", "backward mb1", "forward mb2", "backward mb2",
        "forward mb3", "backward mb3"],
}


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


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    pytest.importorskip("torch")
    out_dir = tmp_path_factory.mktemp("pipeline")
    return out_dir, capture(out_dir, PIPELINE_CONFIG)


def _micro_batches(trace: Trace, step: int) -> dict[str, tuple[float, float]]:
    """`forward mbK` / `backward mbK` -> (start ms, end ms) of its annotation in the step."""
    start, end, _ = step_window(trace, step)
    return {e["name"].strip("# "): (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3) for e in trace["traceEvents"]
            if e.get("ph") == "X" and e["name"].startswith("## ") and start <= e["ts"] < end}


@pytest.mark.slow
def test_capture_writes_one_gzipped_kineto_trace_per_rank(straggler: tuple[Path, Manifest]) -> None:
    out_dir, manifest = straggler
    assert manifest.traces == ("rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz")
    for rank, name in enumerate(manifest.traces):
        assert (out_dir / name).read_bytes()[:2] == b"\x1f\x8b"  # gzip magic
        trace = read_json(out_dir / name)
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
def test_capture_straggler_sleeps_in_its_step_and_rank(straggler: tuple[Path, Manifest]) -> None:
    out_dir, manifest = straggler
    rank0, rank1 = (read_json(out_dir / name) for name in manifest.traces)
    # the sleep is a gap on rank 1's thread at least as long as it (a loaded machine only lengthens it)
    assert longest_gap_ms(rank1, 4) >= 0.99 * STRAGGLER_MS
    assert events_in_step(rank0, 4, "gloo:all_reduce")  # where rank 0 waits for it


@pytest.mark.live
def test_live_capture_straggler_step_is_longer_by_the_sleep(straggler: tuple[Path, Manifest]) -> None:
    out_dir, manifest = straggler
    wall_ms = manifest.step_wall_ms[1]
    extra_ms = wall_ms[4] - statistics.median(ms for step, ms in wall_ms.items() if step != 4)
    # On a busy two-core machine the other rank runs faster while this one sleeps, so allow slack.
    assert 0.6 * STRAGGLER_MS < extra_ms < 1.6 * STRAGGLER_MS
    rank0 = read_json(out_dir / manifest.traces[0])
    waits = [e["dur"] / 1e3 for e in events_in_step(rank0, 4, "gloo:all_reduce")]
    assert max(waits) > 0.5 * STRAGGLER_MS  # rank 0 waits in the DDP all-reduce


@pytest.mark.slow
def test_capture_injections_land_in_their_step_and_rank(mixed: tuple[Path, Manifest]) -> None:
    out_dir, manifest = mixed
    rank0, rank1 = (read_json(out_dir / name) for name in manifest.traces)
    assert longest_gap_ms(rank0, 2) > 110  # host_pause: an uncovered gap
    fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert events_in_step(rank1, 3, fetch)[0]["dur"] / 1e3 > 110
    addmm = [len(events_in_step(rank0, step, "aten::addmm")) for step in (4, 5)]
    assert addmm[0] > addmm[1]  # slow_compute repeats the MLP matmuls
    reduces = events_in_step(rank1, 5, "gloo:all_reduce")
    assert [e["args"]["Input Dims"] for e in reduces].count([[2 * 1024**2]]) == 1  # 8 MB of float32
    assert len(events_in_step(rank1, 6, "checkpoint_save")) == 1
    assert not events_in_step(rank0, 6, "checkpoint_save")
    truths = {truth.category: truth for truth in manifest.ground_truth}
    assert truths["exposed_communication"].ranks == (0, 1)
    assert len(read_trace(out_dir).data_deps) > 0  # the execution traces beside, linked
    assert all(truth.injected_ms is not None and truth.injected_ms > 0 for truth in truths.values())


@pytest.mark.slow
def test_capture_single_rank(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    manifest = capture(tmp_path, CaptureConfig(ranks=1, steps=2, **TINY))
    trace = read_json(tmp_path / "rank0.pt.trace.json.gz")
    assert trace["distributedInfo"]["world_size"] == 1
    assert set(manifest.step_wall_ms[0]) == {2, 3}


@pytest.mark.slow
def test_capture_pipeline_reads_with_both_ranks_and_their_steps(pipeline: tuple[Path, Manifest]) -> None:
    out_dir, manifest = pipeline
    assert sorted(path.name for path in out_dir.glob("rank*")) == [
        "rank0.et.json.gz", "rank0.pt.trace.json.gz", "rank1.et.json.gz", "rank1.pt.trace.json.gz"]
    trace = read_trace(out_dir)
    assert [(info.rank, info.world_size) for info in trace.ranks] == [(0, 2), (1, 2)]
    names = [trace.strings[i] for i in trace.events.name]
    for rank in (0, 1):
        steps = {name for name, r in zip(names, trace.events.rank) if r == rank and name.startswith("ProfilerStep#")}
        assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}
    assert len(trace.data_deps) > 0
    assert load_manifest(out_dir).config == PIPELINE_CONFIG


@pytest.mark.slow
def test_capture_pipeline_runs_1f1b_with_paired_sends_and_receives(pipeline: tuple[Path, Manifest]) -> None:
    out_dir, manifest = pipeline
    stages = [read_json(out_dir / name) for name in manifest.traces]
    for step in manifest.config.recorded_steps:
        for rank, trace in enumerate(stages):
            order = sorted(_micro_batches(trace, step).items(), key=lambda item: item[1][0])
            assert [name for name, _ in order] == ONE_F_ONE_B[rank]
        for sender, receiver in ((0, 1), (1, 0)):  # activations forward, gradients back
            sends = events_in_step(stages[sender], step, "c10d::send")
            receives = events_in_step(stages[receiver], step, "c10d::recv_")
            assert len(sends) == len(receives) == MICROBATCHES
            assert {e["args"]["Concrete Inputs"][2] for e in sends} == {str(receiver)}  # destination
            assert {e["args"]["Concrete Inputs"][2] for e in receives} == {str(sender)}  # source
            transfers = zip(sends, events_in_step(stages[sender], step, "gloo:send"),
                            events_in_step(stages[receiver], step, "gloo:recv"))
            for send, gloo_send, gloo_receive in transfers:
                dims = [[1, 32, 64]]  # micro-batch, sequence, width
                assert gloo_send["args"]["Input Dims"] == gloo_receive["args"]["Input Dims"] == dims
                assert gloo_receive["ts"] + gloo_receive["dur"] >= send["ts"]  # data arrives once sent


def test_capture_pipeline_first_stage_idles_at_the_end_last_stage_at_the_start() -> None:
    # a real 2-stage capture committed with the tests (a ratio of real times: not a live capture's)
    out_dir = DATA / "pipeline_eager_send"
    manifest = load_manifest(out_dir)
    stages = [read_json(out_dir / name) for name in manifest.traces]
    last = manifest.config.microbatches - 1
    start_idle: dict[int, list[float]] = {0: [], 1: []}
    end_idle: dict[int, list[float]] = {0: [], 1: []}
    for step in manifest.config.recorded_steps:
        for rank, trace in enumerate(stages):
            mb = _micro_batches(trace, step)
            fetch = events_in_step(trace, step, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
            start_idle[rank].append(mb["forward mb0"][0] - (fetch[0]["ts"] + fetch[0]["dur"]) / 1e3)
            ready = max(mb[f"forward mb{last}"][1], mb[f"backward mb{last - 1}"][1])
            end_idle[rank].append(mb[f"backward mb{last}"][0] - ready)
    # stage 1 waits for stage 0's first forward; stage 0 waits for the last gradient
    waits = {what: {rank: statistics.median(ms[rank]) for rank in (0, 1)}
             for what, ms in (("start", start_idle), ("end", end_idle))}
    assert waits["start"][1] > max(0.5, 3 * waits["start"][0]), waits
    assert waits["end"][0] > max(0.5, 3 * waits["end"][1]), waits


@pytest.mark.slow
def test_capture_pipeline_with_data_parallel_replicas(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    config = CaptureConfig(ranks=4, steps=2, pipeline=2, microbatches=2, **{**TINY, "layers": 2})
    manifest = capture(tmp_path, config)
    assert [info.rank for info in read_trace(tmp_path).ranks] == [0, 1, 2, 3]
    reduced: dict[int, set[str]] = {}
    for rank, name in enumerate(manifest.traces):  # replica r holds its stages on ranks 2r and 2r+1
        trace = read_json(tmp_path / name)
        peer = rank + 1 if rank % 2 == 0 else rank - 1
        for step in config.recorded_steps:
            sends = events_in_step(trace, step, "c10d::send")
            assert [e["args"]["Concrete Inputs"][2] for e in sends] == [str(peer)] * 2
            (reduce,) = events_in_step(trace, step, "gloo:all_reduce")  # gradients over the stage's replicas
            reduced.setdefault(rank, set()).add(json.dumps(reduce["args"]["Input Dims"]))
    assert reduced[0] == reduced[2] != reduced[1] == reduced[3]  # each stage's own parameters


def test_capture_refuses_traces_of_other_ranks(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "rank5.pt.trace.json.gz").write_bytes(b"")
    with pytest.raises(ConfigError) as caught:
        capture(tmp_path, CaptureConfig(ranks=2, **TINY))
    assert "rank5.pt.trace.json.gz" in str(caught.value)


def test_load_manifest_rejects_other_files(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"format": 1, "config": {}}')
    with pytest.raises(TraceFormatError) as caught:
        load_manifest(tmp_path)
    assert "not a capture manifest" in str(caught.value)
    with pytest.raises(TraceFormatError) as missing:
        load_manifest(tmp_path / "nowhere.json")
    assert "cannot read the manifest" in str(missing.value)


def test_launch_reports_the_failing_rank_and_stops_the_others(tmp_path: Path) -> None:
    _gpt = pytest.importorskip("bottleneck_oracle.capture._gpt")
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
    _gpt = pytest.importorskip("bottleneck_oracle.capture._gpt")
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(CaptureError) as caught:
        _gpt.launch([sleeper, sleeper], 1, tmp_path)
    assert str(caught.value) == "capture timed out after 1 s; ranks [0, 1] still running"
