"""The executors: local processes and Ray tasks read every rank file to the same trace and analysis, a Ray
worker killed mid-task is replaced without changing the result, and bad settings or files fail in one line."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import socket
from pathlib import Path

import numpy as np
import orjson
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, TraceFormatError
from bottleneck_oracle.executor import LocalExecutor, RayExecutor, executor_of, make_executor
from bottleneck_oracle.traces import Trace, read_trace
from tests.conftest import DATA, REAL, REPO, WILD, one_ray_task_killed, run_oracle


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _same(a: object, b: object, where: str = "trace") -> None:
    """Field by field, arrays by value and dtype: every difference named by its path."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), where
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _report(trace: Trace) -> bytes:
    """What ``oracle analyze --json --full-paths`` prints of ``trace``: every step's whole critical path."""
    return orjson.dumps(analysis_to_dict(analyze(trace), full_paths=True), option=orjson.OPT_SERIALIZE_NUMPY)


def multi_rank_folders() -> list[Path]:
    """Every folder of real or public traces, and of our captures, with two or more trace files."""
    roots = [REAL, WILD, DATA, REPO / "examples"]
    found = {p.parent for root in roots if root.is_dir() for p in root.rglob("*.json*")}
    traces = lambda d: [f for f in d.iterdir() if f.name.endswith((".json", ".json.gz")) and f.name != "manifest.json"  # noqa: E731
                        and not f.name.startswith("nccl_trace_rank_")]  # Flight Recorder dumps, not traces
    return sorted(d for d in found if len(traces(d)) >= 2)


def test_settings_name_the_executor_from_the_environment() -> None:
    s = Settings.from_env({"ORACLE_EXECUTOR": "ray", "RAY_ADDRESS": "head:6379"})
    assert (s.executor, s.ray_address) == ("ray", "head:6379")
    assert (Settings.from_env({}).executor, Settings.from_env({}).ray_address) == ("local", None)
    ray = executor_of(s)
    assert isinstance(ray, RayExecutor) and ray.address == "head:6379"
    assert isinstance(executor_of(Settings.from_env({"ORACLE_WORKERS": "3"})), LocalExecutor)


@pytest.mark.parametrize(("kind", "address", "says"), [
    ("spark", None, "executor 'spark': unknown; one of local, ray"),
    ("local", "head:6379", "ray address head:6379: given, but the executor is local"),
])
def test_a_bad_executor_setting_is_named(kind: str, address: str | None, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        make_executor(kind, ray_address=address)


def test_a_ray_address_where_nothing_listens_fails_before_ray_waits_for_it(tmp_path: Path) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    # the probe's own error: ray.init would have waited minutes for the head, then said something else
    with pytest.raises(ConfigError, match=f"ray address {address}: no Ray head node answers there"):
        RayExecutor(address).map(len, ["x"])
    with pytest.raises(ConfigError, match="not HOST:PORT"):
        RayExecutor("headnode").map(len, ["x"])


def test_the_cli_refuses_an_unreachable_cluster_in_one_line() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    done = run_oracle("analyze", REPO / "examples" / "gpt_2rank", "--executor", "ray", "--ray-address", address)
    assert done.returncode == 2, done.stderr
    assert f"ray address {address}: no Ray head node answers there" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# ---- on a local Ray cluster of two worker processes (serial: it starts processes of its own) ----


@pytest.fixture(scope="module")
def job64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic 64-rank job of the results (7b, dp 8 x tp 4 x pp 2)."""
    from bottleneck_oracle.synth import synthesize
    from bottleneck_oracle.synth.config import SynthConfig

    out = tmp_path_factory.mktemp("job64")
    synthesize(out, SynthConfig(model="7b", dp=8, tp=4, pp=2, microbatches=2, steps=2), workers=2)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("folder", multi_rank_folders(), ids=lambda p: str(p.relative_to(p.parents[1])))
def test_ray_reads_every_multi_rank_folder_as_local_processes_do(ray_cluster, folder: Path) -> None:  # type: ignore[no-untyped-def]
    try:
        local = read_trace(folder, executor=LocalExecutor(2), partial=True)
    except TraceFormatError as e:  # not one job (execution traces alone, two runs of one rank): the same error
        with pytest.raises(TraceFormatError) as ray_error:
            read_trace(folder, executor=RayExecutor(), partial=True)
        assert str(ray_error.value) == str(e)
        return
    ray = read_trace(folder, executor=RayExecutor(), partial=True)
    _same(local, ray)
    assert _report(local) == _report(ray)


@pytest.mark.slow
def test_the_8_rank_dlrm_job_with_its_execution_traces_is_the_same_on_ray(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    files = [REAL / "param" / "dlrm_8rank_kineto", REAL / "param" / "dlrm_8rank_et"]
    local, ray = read_trace(files, executor=LocalExecutor(1)), read_trace(files, executor=RayExecutor())
    assert len(local.ranks) == 8 and len(local.data_deps) > 0  # the execution traces were linked
    _same(local, ray)
    assert _report(local) == _report(ray)


@pytest.mark.slow
def test_a_64_rank_job_is_the_same_on_ray_and_a_killed_worker_changes_nothing(ray_cluster, job64: Path) -> None:  # type: ignore[no-untyped-def]
    local = read_trace(job64, executor=LocalExecutor(1))
    executor = RayExecutor()
    with one_ray_task_killed() as killed:  # a worker process while it reads a rank
        ray = read_trace(job64, executor=executor)
    assert killed, "no worker was caught running a task"
    assert len(ray.ranks) == 64
    _same(local, ray)
    peaks = executor.stats.peak_rss_bytes
    assert len(peaks) == len(list(job64.glob("*.json*")))  # the manifest too
    # each task's own peak: a worker that read 30 ranks holds no more than one (the object store's pages aside)
    assert max(peaks) < 1.5 * float(np.median(peaks)), peaks
    assert _report(local) == _report(ray)


@pytest.mark.slow
def test_a_task_whose_worker_dies_every_time_fails_in_one_line(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.errors import SetupError

    with pytest.raises(SetupError, match=r"ray: a task failed 4 times, its worker dying each time \(WorkerCrashedError\)"):
        RayExecutor().map(os._exit, [1])  # the worker process exits in the middle of the task, on every try


@pytest.mark.slow
def test_a_bad_rank_file_fails_on_ray_as_it_does_locally(ray_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = REPO / "examples" / "gpt_2rank"
    for f in good.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    victim = sorted(tmp_path.glob("*.json*"))[0]
    raw = gzip.decompress(victim.read_bytes()) if victim.name.endswith(".gz") else victim.read_bytes()
    victim.write_bytes(gzip.compress(raw[: len(raw) // 2]))  # truncated JSON inside a good gzip
    with pytest.raises(TraceFormatError) as local:
        read_trace(tmp_path, executor=LocalExecutor(1))
    with pytest.raises(TraceFormatError) as ray:
        read_trace(tmp_path, executor=RayExecutor())
    assert str(ray.value) == str(local.value) and victim.name in str(ray.value)


@pytest.mark.slow
def test_oracle_analyze_with_ray_prints_what_it_prints_locally(tmp_path: Path) -> None:
    example = REPO / "examples" / "gpt_2rank"
    local = run_oracle("analyze", example, "--json")
    ray = run_oracle("analyze", example, "--json", "--executor", "ray")  # starts, then stops, a Ray of its own
    assert local.returncode == 0 and ray.returncode == 0, ray.stderr
    assert json.loads(ray.stdout) == json.loads(local.stdout)


@pytest.mark.slow
def test_oracle_diff_with_ray_compares_as_it_does_locally(tmp_path: Path) -> None:
    base, new = DATA / "diff_pair" / "base", DATA / "diff_pair" / "stall"
    runs = {}
    for executor in ("local", "ray"):  # a workspace each: the second run must read, not find a cached analysis
        env = {**os.environ, "ORACLE_HOME": str(tmp_path / executor)}
        runs[executor] = run_oracle("diff", base, new, "--format", "json", "--executor", executor, env=env)
        assert runs[executor].returncode == 0, runs[executor].stderr
    assert json.loads(runs["ray"].stdout) == json.loads(runs["local"].stdout)


@pytest.mark.slow
def test_oracle_ingest_with_ray_loads_what_it_loads_locally(tmp_path: Path) -> None:
    """The ranks' parts as Ray tasks, each on its own connection to the workspace's embedded database."""
    example = REPO / "examples" / "gpt_2rank"
    reports = {}
    for executor in ("local", "ray"):
        env = {**os.environ, "ORACLE_HOME": str(tmp_path / executor)}
        try:
            run = run_oracle("ingest", example, "--json", "--no-predict", "--executor", executor, env=env)
            assert run.returncode == 0, run.stderr
            reports[executor] = json.loads(run.stdout)
        finally:
            run_oracle("db", "stop", env=env)
    for report in reports.values():
        report.pop("seconds")
    assert reports["ray"] == reports["local"] and reports["ray"]["outcome"] == "loaded"


@pytest.mark.slow
def test_ray_says_where_each_task_ran_and_sends_a_task_near_its_files(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    """A scan's round 2 goes to the node that read the rank in round 1 (its parsed trace waits there)."""
    executor = RayExecutor()
    assert executor.map(len, ["a", "bb"]) == [1, 2]
    here = ray_cluster.get_runtime_context().get_node_id()
    assert executor.stats.node == [here, here]
    assert executor.map(len, ["ccc"], near=[here]) == [3] and executor.stats.node == [here]
    local = LocalExecutor(2)
    assert local.map(len, ["a", "bb"]) == [1, 2] and local.stats.node == ["", ""]


class _Counted:
    """An item that notes, when Ray serializes it to send its task, how many tasks were then in flight."""

    sent: list[int] = []
    finished = [0]

    def __init__(self, text: str) -> None:
        self.text = text

    def __reduce__(self):  # type: ignore[no-untyped-def]
        _Counted.sent.append(len(_Counted.sent) + 1 - _Counted.finished[0])  # this one too
        return str, (self.text,)


@pytest.mark.slow
def test_ray_keeps_a_window_of_tasks_in_flight_not_every_item(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    """The object store holds the items of the tasks in flight: at most twice the CPUs (8 at least)."""
    items = [_Counted("x" * i) for i in range(30)]
    done = lambda _: _Counted.finished.__setitem__(0, _Counted.finished[0] + 1)  # noqa: E731
    assert RayExecutor().map(len, items, done=done) == list(range(30))
    assert len(_Counted.sent) == 30 and max(_Counted.sent) == 8  # 2 CPUs: the window's floor
