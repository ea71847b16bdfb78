"""Tests for capture/instrument.py: real profiled loops, their files, injections, the ET layout, overhead."""

from __future__ import annotations

import gzip
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from bottleneck_oracle.capture.instrument import (  # noqa: E402
    LOAD_ANNOTATION,
    StepProfiler,
    StepSchedule,
    _activities,
    _cuda_sync_config,
    profile_training,
)
from bottleneck_oracle.config import Settings  # noqa: E402
from bottleneck_oracle.errors import ConfigError  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402
from bottleneck_oracle.truth.injection import Injection  # noqa: E402

Trace = dict[str, Any]
SCHEDULE = StepSchedule(wait=1, warmup=1, active=3)  # records ProfilerStep#2 to #4


def _read(path: Path) -> Trace:
    with gzip.open(path, "rt") as file:
        trace: Trace = json.load(file)
    return trace


def _spans(trace: Trace, name: str) -> list[tuple[float, float]]:
    """(start ms, end ms) of every complete event called `name`."""
    return sorted((e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3) for e in trace["traceEvents"]
                  if e.get("ph") == "X" and e.get("name") == name)


def _steps(trace: Trace) -> dict[int, tuple[float, float]]:
    return {int(e["name"].split("#")[1]): (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3)
            for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}


def _gaps(trace: Trace, step: int) -> tuple[float, float]:
    """Uncovered ms on the step's thread at its start and at its end."""
    start, end = _steps(trace)[step]
    tid = next(e["tid"] for e in trace["traceEvents"] if e.get("name") == f"ProfilerStep#{step}")
    inside = sorted((e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3) for e in trace["traceEvents"]
                    if e.get("ph") == "X" and e["tid"] == tid and start < e["ts"] / 1e3 < end)
    return inside[0][0] - start, end - max(span[1] for span in inside)


class _Loop:
    """A tiny real training loop: a two-layer MLP, SGD, random batches."""

    def __init__(self, steps: int) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.batches = [torch.randn(16, 32) for _ in range(steps)]

    def train(self, batch: Any) -> None:
        self.model(batch).sum().backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def run(self, profiler: StepProfiler) -> None:
        with profiler:
            for batch in profiler.wrap_loader(self.batches):
                self.train(batch)
                profiler.step()


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StepProfiler]:
    out_dir = tmp_path_factory.mktemp("injected")
    profiler = StepProfiler(out_dir, schedule=SCHEDULE, injections=[
        "straggler_rank@2=40", "host_pause@3:0=40", "dataloader_stall@4=40", "checkpoint_stall@3=1",
        "host_pause@4:1=40",  # another rank's: not applied here
    ])
    _Loop(7).run(profiler)
    return out_dir, profiler


def test_step_profiler_writes_kineto_and_execution_trace_named_by_rank_and_steps(
    injected: tuple[Path, StepProfiler]
) -> None:
    out_dir, profiler = injected
    names = ["rank0.steps2-4.pt.trace.json.gz", "rank0.steps2-4.et.json.gz"]
    assert [path.name for path in profiler.files] == names
    assert sorted(path.name for path in out_dir.iterdir()) == sorted(names)  # no scratch file left
    trace = _read(out_dir / names[0])
    assert sorted(_steps(trace)) == [2, 3, 4]
    assert trace["record_shapes"] == 1 and "Input Dims" in json.dumps(trace["traceEvents"])
    assert _read(out_dir / names[1])["schema"].startswith("1.1")  # kept as torch wrote it


def test_step_profiler_output_reads_and_links(injected: tuple[Path, StepProfiler]) -> None:
    out_dir, _ = injected
    trace = read_trace(out_dir)
    assert [(info.rank, info.rank_source) for info in trace.ranks] == [(0, "file name")]
    assert len(trace.data_deps) > 50  # the execution trace's data dependencies, linked to ops


@pytest.mark.slow  # times real sleeps and gaps: serial, beside no other work
def test_step_profiler_injections_land_in_their_step(injected: tuple[Path, StepProfiler]) -> None:
    out_dir, profiler = injected
    assert profiler.applied == (
        Injection("straggler_rank", 2, (0,), 40.0), Injection("checkpoint_stall", 3, (0,), 1.0),
        Injection("host_pause", 3, (0,), 40.0), Injection("dataloader_stall", 4, (0,), 40.0),
    )
    trace = _read(out_dir / "rank0.steps2-4.pt.trace.json.gz")
    steps = _steps(trace)
    assert _gaps(trace, 2)[0] > 35  # straggler: before the step's first op
    assert _gaps(trace, 3)[1] > 35  # host pause: after its last op
    (save,) = _spans(trace, "checkpoint_save")
    assert steps[3][0] < save[0] < steps[3][1]
    loads = [end - start for start, end in _spans(trace, LOAD_ANNOTATION)]
    assert len(loads) == 3 and max(loads) == loads[2] > 35  # the stall sits in step 4's fetch
    assert _gaps(trace, 4)[1] < 20  # rank 1's pause was not applied


def test_step_profiler_takes_injections_from_settings_and_environment(tmp_path: Path) -> None:
    settings = Settings.from_env({"ORACLE_INJECT": "host_pause@2=5; straggler_rank@3:1 ;"})
    assert settings.injections == ("host_pause@2=5", "straggler_rank@3:1")
    profiler = StepProfiler(tmp_path, schedule=SCHEDULE, settings=settings)
    assert profiler.injections == (Injection("host_pause", 2, (), 5.0), Injection("straggler_rank", 3, (1,)))
    assert StepProfiler(tmp_path, settings=settings, injections=()).injections == ()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"injections": ["slow_compute@2"]}, "unknown category 'slow_compute'"),
        ({"injections": [Injection("exposed_communication", 2)]}, "a profiler cannot inject"),
        ({"injections": ["host_pause@1"]}, "step 1 is not recorded; ProfilerStep#2 to #4 are"),
        ({"injections": ["host_pause@2", "host_pause@2=3"]}, "same step and ranks"),
        ({"name": "rank{rank}.{step}"}, "only {rank}, {first} and {last}"),
        ({"name": "traces/rank{rank}"}, "a file name, not a path"),
        ({"schedule": StepSchedule(repeat=2), "name": "rank{rank}"}, "needs {first}"),
    ],
)
def test_step_profiler_rejects(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    options.setdefault("schedule", SCHEDULE)
    with pytest.raises(ConfigError) as caught:
        StepProfiler(tmp_path, **options)
    assert message in str(caught.value)


def test_step_schedule_windows_and_checks() -> None:
    schedule = StepSchedule(wait=2, warmup=1, active=3, repeat=2)
    assert schedule.windows() == (range(3, 6), range(9, 12))
    assert schedule.window_of(11) == range(9, 12) and schedule.window_of(4) == range(3, 6)
    with pytest.raises(ConfigError):
        StepSchedule(active=0)
    with pytest.raises(ConfigError):
        StepSchedule(repeat=0)  # torch's "forever" would never end the overhead


def test_profile_training_writes_one_file_pair_per_window(tmp_path: Path) -> None:
    schedule = StepSchedule(wait=1, warmup=1, active=2, repeat=2)
    with profile_training(tmp_path, schedule=schedule, rank=3, injections=()) as rec:
        loop = _Loop(9)
        for batch in loop.batches:
            loop.train(batch)
            rec.step()
    assert [path.name for path in rec.files] == [
        "rank3.steps2-3.pt.trace.json.gz", "rank3.steps2-3.et.json.gz",
        "rank3.steps6-7.pt.trace.json.gz", "rank3.steps6-7.et.json.gz",
    ]
    assert sorted(_steps(_read(rec.files[2]))) == [6, 7]
    assert read_trace(rec.files[2:]).ranks[0].rank == 3


def test_step_profiler_stop_inside_a_window_writes_it(tmp_path: Path) -> None:
    loop, profiler = _Loop(4), StepProfiler(tmp_path, schedule=SCHEDULE, injections=(), execution_trace=False)
    profiler.start()
    for batch in loop.batches:  # steps 0-3: stops in the window's last step, #4, which is empty
        loop.train(batch)
        profiler.step()
    profiler.stop()
    profiler.stop()  # a second stop does nothing
    (path,) = profiler.files
    assert path.name == "rank0.steps2-3.pt.trace.json.gz"
    assert sorted(_steps(_read(path))) == [2, 3, 4]
    with pytest.raises(RuntimeError):
        profiler.step()


def test_step_profiler_records_cpu_only_without_a_gpu() -> None:
    activities, experimental = _activities()
    if torch.cuda.is_available():
        assert torch.profiler.ProfilerActivity.CUDA in activities and experimental is not None
    else:
        assert activities == [torch.profiler.ProfilerActivity.CPU] and experimental is None
    assert _cuda_sync_config() is not None  # torch 2.13 has the flag


_DISTRIBUTED = """
import sys, torch.distributed as dist
from bottleneck_oracle.capture.instrument import StepProfiler, StepSchedule
from bottleneck_oracle.capture._gpt import exit_now
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
with StepProfiler(sys.argv[3], schedule=StepSchedule(wait=0, warmup=1, active=2), injections=()) as rec:
    for _ in range(4):
        dist.all_reduce(__import__("torch").ones(1000))
        rec.step()
dist.barrier()  # neither rank tears gloo down while the other still talks to it
dist.destroy_process_group()
exit_now()  # libtorch's exit-time destructors sometimes abort a finished rank
"""


@pytest.mark.slow
def test_step_profiler_names_files_by_the_distributed_rank(tmp_path: Path) -> None:
    out_dir = tmp_path / "traces"
    commands = [[sys.executable, "-c", _DISTRIBUTED, str(r), str(tmp_path / "store"), str(out_dir)] for r in (0, 1)]
    processes = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for command in commands]
    errors = [p.communicate(timeout=120)[1].decode(errors="replace")[-2000:] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], errors
    assert sorted(path.name for path in out_dir.iterdir()) == [
        "rank0.steps1-2.et.json.gz", "rank0.steps1-2.pt.trace.json.gz",
        "rank1.steps1-2.et.json.gz", "rank1.steps1-2.pt.trace.json.gz",
    ]
    trace = read_trace(out_dir)
    assert [(info.rank, info.rank_source, info.world_size) for info in trace.ranks] == [
        (0, "distributedInfo", 2), (1, "distributedInfo", 2)]
    assert len(trace.data_deps) > 0


def _step_ms(profiler: StepProfiler | None, loop: _Loop, steps: int) -> Iterator[float]:
    if profiler is not None:
        profiler.start()
    for batch in loop.batches[:steps]:
        start = time.perf_counter()
        loop.train(batch)
        if profiler is not None:
            profiler.step()
        yield (time.perf_counter() - start) * 1e3
    if profiler is not None:
        profiler.stop()


@pytest.mark.live  # a ratio of real times: make test-live
def test_step_profiler_costs_nothing_outside_its_window(tmp_path: Path) -> None:
    schedule = StepSchedule(wait=20, warmup=1, active=2)  # steps 0-19 idle, 20 warmup, 21-22 recorded
    loop = _Loop(40)
    outside = list(range(1, 20)) + list(range(24, 40))
    plain: list[float] = []
    profiled: list[float] = []
    for _ in range(3):  # interleaved, so the shared machine's load hits both alike
        plain += [ms for i, ms in enumerate(_step_ms(None, loop, 40)) if i in outside]
        profiler = StepProfiler(tmp_path, schedule=schedule, injections=())
        profiled += [ms for i, ms in enumerate(_step_ms(profiler, loop, 40)) if i in outside]
    assert statistics.median(profiled) < 1.3 * statistics.median(plain) + 0.05
