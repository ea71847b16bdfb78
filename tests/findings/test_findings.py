"""Detectors on hand-built CPU steps: each injected bottleneck is found on its step, and only it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.types import Bottleneck
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import op, step, write

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _step(n: int, t0: int, loader_ms: float = 0.5, pause_ms: float = 0, ckpt_ms: float = 0) -> tuple[list[dict], int]:
    t = t0
    events = [op(LOADER, t, int(loader_ms * 1000), cat="user_annotation")]
    t += int(loader_ms * 1000) + 100
    events.append(op("aten::mm", t, 7_400))
    t += 7_400 + int(pause_ms * 1000)
    events.append(op("aten::add", t, 1_800))
    t += 1_900
    if ckpt_ms:
        events += [op("checkpoint_save", t, int(ckpt_ms * 1000), cat="user_annotation"),
                   op("aten::detach", t + 10, int(ckpt_ms * 1000) - 20)]
        t += int(ckpt_ms * 1000)
    return [step(n, t0, t - t0)] + events, t


def _trace(tmp_path: Path, **inject: dict[str, float]) -> Path:
    events, t = [], 0
    for n in range(1, 8):
        evs, t = _step(n, t, **inject.get(f"s{n}", {}))
        events += evs
    return write(tmp_path / "rank0.json.gz", events, rank=0, world=1)


def _found(path: Path) -> list[tuple[str, int | None]]:
    return [(f.category.value, f.step) for f in analyze(read_trace(path)).findings]


def test_clean_steps_have_no_finding(tmp_path: Path) -> None:
    a = analyze(read_trace(_trace(tmp_path)))
    assert a.findings == () and a.slow_steps == ()


@pytest.mark.parametrize("inject,expected", [
    ({"s3": {"loader_ms": 30}}, (Bottleneck.DATALOADER_STALL, 3)),
    ({"s4": {"pause_ms": 20}}, (Bottleneck.HOST_PAUSE, 4)),
    ({"s5": {"ckpt_ms": 15}}, (Bottleneck.CHECKPOINT_STALL, 5)),
])
def test_injected_bottleneck_is_the_top_finding(tmp_path: Path, inject: dict, expected: tuple) -> None:
    a = analyze(read_trace(_trace(tmp_path, **inject)))
    top = a.findings[0]
    assert (top.category, top.step, top.ranks) == (*expected, (0,))
    assert [(s.step, s.rank) for s in a.slow_steps] == [(expected[1], 0)]
    assert top.impact_ms >= 14
    assert all(f.step == expected[1] for f in a.findings)


def test_host_pause_names_the_ops_around_the_gap(tmp_path: Path) -> None:
    a = analyze(read_trace(_trace(tmp_path, s4={"pause_ms": 20})))
    pause = next(f for f in a.findings if f.category == Bottleneck.HOST_PAUSE)
    assert pause.ops == ("aten::mm", "aten::add") and pause.impact_ms == 20.0
    assert "between 'aten::mm' and 'aten::add'" in pause.evidence


def test_host_bound_gpu_job_is_launch_overhead() -> None:
    from tests.conftest import REAL

    a = analyze(read_trace(REAL / "hta" / "nccl_parser_config"))
    (f,) = [f for f in a.findings if f.category == Bottleneck.LAUNCH_OVERHEAD]
    assert f.step is None and f.ranks == (0,)
    assert "GPU was busy 18% of the step" in f.evidence and f.impact_ms > 150  # NCCL kernels excluded
