"""Tests for synth/synthesize.py: files, manifest, determinism, ground truth and the 1F1B bubble."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.errors import ConfigError, TraceFormatError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.hardware import HARDWARE, collective_time_s
from bottleneck_oracle.synth.model import ModelSpec
from bottleneck_oracle.synth.schedule import simulate
from bottleneck_oracle.synth.synthesize import (
    ground_truth,
    load_synth_manifest,
    synthesize,
)
from bottleneck_oracle.synth.topology import COMPUTE_STREAM
from bottleneck_oracle.traces import EventKind, read_trace
from bottleneck_oracle.truth.injection import parse_injection

SMALL = SynthConfig(model="tiny", dp=2, pp=2, microbatches=2, steps=3,
                    injections=(parse_injection("straggler_rank@2:1=5"),))
PIPE = ModelSpec("pipe", layers=8, d_model=1024, heads=8, ffn=4096, vocab=1024, seq_len=1024, micro_batch=4)


def test_synthesize_writes_traces_and_a_manifest(tmp_path: Path) -> None:
    manifest = synthesize(tmp_path, SMALL, workers=1)
    traces = [f"rank{r}.pt.trace.json.gz" for r in range(4)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", *traces]
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["recorded_steps"] == [1, 2, 3] and data["config"]["injections"] == ["straggler_rank@2:1=5ms"]
    truth = data["ground_truth"][0]
    assert (truth["category"], truth["step"], truth["ranks"], truth["unit"]) == ("straggler_rank", 2, [1], "ms")
    assert truth["injected_ms"] == pytest.approx(5.0, abs=0.5)
    assert set(data["step_ms"]) == {"0", "1", "2", "3"} and manifest.events > 1000
    assert load_synth_manifest(tmp_path) == manifest


def test_same_config_same_bytes(tmp_path: Path) -> None:
    synthesize(tmp_path / "a", SMALL, workers=2)
    synthesize(tmp_path / "b", SMALL, workers=1)
    for path in sorted((tmp_path / "a").iterdir()):
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name


def test_synthesize_refuses_traces_of_another_job(tmp_path: Path) -> None:
    (tmp_path / "rank9.pt.trace.json.gz").write_bytes(b"")
    with pytest.raises(ConfigError) as caught:
        synthesize(tmp_path, SMALL)
    assert "rank9.pt.trace.json.gz" in str(caught.value)


def test_load_refuses_what_is_not_a_manifest(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError):
        load_synth_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": 1, "traces": {}}))
    with pytest.raises(TraceFormatError) as caught:
        load_synth_manifest(tmp_path)
    assert "not a synthetic-trace manifest" in str(caught.value)


BASE = SynthConfig(model="gpt2-small", dp=2, pp=2, microbatches=2, steps=5)


@pytest.mark.parametrize(("text", "expected_ms"), [
    ("dataloader_stall@3:1=40", 40.0), ("straggler_rank@3:1=40", 40.0), ("host_pause@3:1=40", 40.0),
    ("pipeline_bubble@3:0=40", 40.0), ("exposed_communication@3=512MB", None), ("slow_compute@3:1=3x", None),
    ("host_sync@3:1=10", None), ("launch_overhead@3:1=4x", None), ("checkpoint_stall@3:1=256MB", None),
])
def test_injected_steps_are_slower_by_the_injected_amount(text: str, expected_ms: float | None) -> None:
    config = BASE.with_changes(injections=(parse_injection(text),))
    result = simulate(config)
    (truth,) = ground_truth(config, result)
    assert truth.injected_ms > 0.5
    if expected_ms is not None:
        assert truth.injected_ms == pytest.approx(expected_ms, rel=0.02)
    # against the same ranks' other steps (the truth is the mean over the injection's ranks)
    excess = [result.ms(3, r) - float(np.median(np.delete(result.step_ms[r], 2))) for r in truth.ranks]
    assert float(np.mean(excess)) == pytest.approx(truth.injected_ms, rel=0.15, abs=1.0)


def test_checkpoint_truth_is_the_copy_plus_the_write() -> None:
    config = BASE.with_changes(injections=(parse_injection("checkpoint_stall@3:1=256MB"),))
    (truth,) = ground_truth(config, simulate(config))
    hw = HARDWARE["H100"]
    copy_ms, write_ms = 256e6 / hw.pcie_bytes_per_s * 1e3, 256e6 / hw.disk_bytes_per_s * 1e3
    assert truth.injected_ms == pytest.approx(copy_ms + write_ms, rel=0.03)


def _compute_kernels(trace_dir: Path, rank: int, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, launched by the main thread) of the compute-stream kernels of one step, in time order."""
    trace = read_trace(trace_dir)
    ev, names = trace.events, trace.strings
    mark = next(i for i in np.flatnonzero((ev.rank == rank) & (ev.kind == EventKind.ANNOTATION))
                if names[ev.name[i]] == f"ProfilerStep#{step}")
    k = np.flatnonzero((ev.rank == rank) & (ev.kind == EventKind.KERNEL) & (ev.stream == COMPUTE_STREAM))
    k = k[(ev.start_ns[k] >= ev.start_ns[mark]) & (ev.start_ns[k] < ev.end_ns[mark])]
    k = k[np.argsort(ev.start_ns[k])]
    calls = np.flatnonzero((ev.rank == rank) & (ev.kind == EventKind.RUNTIME))
    thread = dict(zip(ev.correlation[calls].tolist(), (trace.lanes.label[x] for x in ev.lane[calls])))
    forward = np.array(["pt_main_thread" in thread[c] and "multi_tensor" not in names[n]
                        for c, n in zip(ev.correlation[k].tolist(), ev.name[k].tolist())])
    return ev.start_ns[k], ev.end_ns[k], forward


@pytest.mark.parametrize("microbatches", [8, 16])
def test_one_f_one_b_bubble_sits_where_it_belongs(tmp_path: Path, microbatches: int) -> None:
    pp = 4
    config = SynthConfig(model=PIPE, pp=pp, microbatches=microbatches, steps=3, noise=0.0, interference=0.0)
    synthesize(tmp_path, config, workers=1)
    first = _compute_kernels(tmp_path, 0, 2)
    last = _compute_kernels(tmp_path, pp - 1, 2)
    busy = float((first[1] - first[0]).sum())
    forward = float((first[1] - first[0])[first[2]].sum()) / microbatches  # F: one micro-batch's forward
    backward = busy / microbatches - forward
    hop = forward + collective_time_s("sendrecv", 2 * 4 * 1024 * 1024, (0, 1), HARDWARE["H100"]) * 1e9
    # the last stage waits for (pp - 1) forwards and hops before its first activation, then never idles
    assert last[0][0] - first[0][0] == pytest.approx((pp - 1) * hop, rel=0.15)
    assert (last[0][1:] - last[1][:-1]).max() < 0.02 * busy / microbatches
    # the first stage idles (pp - 1)·(F + B) in all: (pp - 1)·B before its first backward, (pp - 1)·F in
    # the cool-down after its last forward, and next to nothing in the steady state between them
    gaps = first[0][1:] - first[1][:-1]
    idle = gaps > 20_000
    first_backward = first[0][np.flatnonzero(~first[2])[0]]
    last_forward = first[1][np.flatnonzero(first[2])[-1]]
    warmup = gaps[idle & (first[0][1:] <= first_backward)].sum()
    cooldown = gaps[idle & (first[1][:-1] >= last_forward)].sum()
    steady = gaps[idle].sum() - warmup - cooldown  # p2p round trips between steady-state passes
    assert (warmup + cooldown) / busy == pytest.approx((pp - 1) / microbatches, rel=0.2)
    assert warmup == pytest.approx((pp - 1) * backward, rel=0.2)
    assert cooldown == pytest.approx((pp - 1) * forward, rel=0.35)
    assert steady < 0.1 * (microbatches - pp + 1) * (forward + backward)
