"""The peers of `oracle analyze` in bench_analyze.py: HTA's critical path, and a parse floor.

`run_hta(trace_dir)` measures Meta's Holistic Trace Analysis doing the same work
as `oracle analyze`: load a trace folder and compute a critical path for every
ProfilerStep of every rank. HTA runs in a child process under its own virtual
environment (`benchmarks/.work/hta-venv`, made once by `ensure_hta_venv`), so
that its pandas/jupyterlab stack never touches ours; `_hta_worker.py` is the
child. `run_parse_floor(trace_dir)` measures a child that only gunzips and
`orjson.loads` the same files (`_parse_floor_worker.py`).

Each child is timed from spawn to exit (wall), and its memory is taken two
ways: the peak RSS of its largest process (`wait4` rusage, which covers the
processes it waited for, such as HTA's parsing pool) and the peak of the
summed PSS of its whole process tree, sampled from /proc.

How HTA finds ranks (hta/common/trace_file.py, 0.5.0): every file in the folder
whose name ends in `.gz` or `.json` is a trace; its rank is the first match of
the regex `"rank":\\s+(\\d+)` read line by line (so compact JSON such as
`"rank":3` is missed); a file without a match becomes rank 0, and a later
file with the same rank silently replaces an earlier one. `HtaRun.files` and
`HtaRun.ranks` show when that happened.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

BENCH_DIR = Path(__file__).resolve().parent
WORK_DIR = BENCH_DIR / ".work"
DEFAULT_HTA_VENV = WORK_DIR / "hta-venv"
HTA_WORKER = BENCH_DIR / "_hta_worker.py"
PARSE_FLOOR_WORKER = BENCH_DIR / "_parse_floor_worker.py"
# HTA 0.5.0 (the latest release, May 2025) requires no torch (its wheel metadata: jupyterlab, numpy,
# networkx, pandas, plotly, pydot, pytest); it predates pandas 3, so it runs with pandas 2.
HTA_PIP_ARGS = ("holistictraceanalysis==0.5.0", "pandas<3")
VENV_STAMP = "bench-stamp.json"
REPORTED_PACKAGES = ("holistictraceanalysis", "pandas", "numpy", "networkx", "plotly", "jupyterlab")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True, slots=True)
class ChildRun:
    """Wall time and memory of one child process (and its descendants)."""

    wall_s: float
    peak_rss_bytes: int  # largest single process (wait4 rusage ru_maxrss)
    peak_tree_pss_bytes: int  # largest sampled sum of PSS over the process tree
    returncode: int
    timed_out: bool
    log_path: str

    @property
    def peak_bytes(self) -> int:
        """The headline memory figure: the larger of the two peaks (sampling can miss a short spike)."""
        return max(self.peak_rss_bytes, self.peak_tree_pss_bytes)


@dataclass(frozen=True, slots=True)
class HtaStep:
    """HTA's critical path for one (rank, step); `step` is None for a whole-trace call."""

    rank: int
    step: int | None
    ok: bool
    error: str | None
    cp_length_us: int | None  # sum of the path's edge weights (HTA's whole µs)
    cp_span_us: int | None  # time from the path's first node to its last
    seconds: float


@dataclass(frozen=True, slots=True)
class HtaRun:
    """HTA loading a folder and running its critical path per step; times in seconds."""

    trace_dir: str
    child: ChildRun
    hta_version: str
    files: int  # trace files HTA sees in the folder
    ranks: tuple[int, ...]  # ranks HTA loaded (fewer than files: HTA merged some)
    events: int  # rows in HTA's dataframes after its own filtering
    import_s: float | None
    load_s: float | None  # TraceAnalysis(trace_dir=...) constructor
    cp_s: float | None  # all critical_path_analysis calls
    worker_s: float | None  # from before `import hta` to the last call, in the child
    steps_found: int
    steps: tuple[HtaStep, ...]

    @property
    def complete(self) -> bool:
        """True when every step found was analysed (no budget cut, no time-out)."""
        return not self.child.timed_out and self.steps_found > 0 and len(self.steps) == self.steps_found

    @property
    def failed_steps(self) -> tuple[HtaStep, ...]:
        """Steps whose critical path HTA did not produce."""
        return tuple(s for s in self.steps if not s.ok)

    @property
    def estimated_wall_s(self) -> float | None:
        """Child wall time, with the critical path part scaled to all steps found when cut short.

        None when the child ended before finishing a single step (killed while loading, or failed).
        """
        if self.complete:
            return self.child.wall_s
        if not self.steps:
            return None
        per_step = sum(s.seconds for s in self.steps) / len(self.steps)
        done_cp = self.cp_s if self.cp_s is not None else sum(s.seconds for s in self.steps)
        return self.child.wall_s - done_cp + per_step * self.steps_found

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record, with the derived fields."""
        out = asdict(self)
        out["child"]["peak_bytes"] = self.child.peak_bytes
        out.update(complete=self.complete, failed=len(self.failed_steps), estimated_wall_s=self.estimated_wall_s)
        return out


@dataclass(frozen=True, slots=True)
class ParseFloorRun:
    """A child that only gunzips and `orjson.loads` every trace file; times in seconds."""

    trace_dir: str
    child: ChildRun
    files: int
    gc_during_loads: bool
    events: int
    raw_bytes: int
    read_s: float
    gunzip_s: float
    loads_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record."""
        out = asdict(self)
        out["child"]["peak_bytes"] = self.child.peak_bytes
        return out


def trace_files(trace_dir: Path) -> list[Path]:
    """The files HTA treats as traces in `trace_dir`: names ending in `.gz` or `.json`."""
    return sorted(p for p in Path(trace_dir).iterdir() if p.is_file() and p.name.endswith((".gz", ".json")))


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _package_versions(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], check=True, capture_output=True)
    listed = {p["name"].lower(): p["version"] for p in json.loads(out.stdout)}
    return {name: listed[name] for name in REPORTED_PACKAGES if name in listed} | (
        {"torch": listed["torch"]} if "torch" in listed else {}
    )


def _dir_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def hta_venv_info(venv: Path = DEFAULT_HTA_VENV) -> dict[str, Any] | None:
    """What `ensure_hta_venv` recorded when it made `venv` (command, versions, size, time), or None."""
    stamp = venv / VENV_STAMP
    return json.loads(stamp.read_text()) if stamp.is_file() else None


def ensure_hta_venv(venv: Path = DEFAULT_HTA_VENV, *, base_python: str = sys.executable) -> Path:
    """Make the HTA virtual environment once and return its python.

    Reused while its stamp names the same pip arguments; otherwise rebuilt from
    scratch with `python -m venv` and one `pip install` of `HTA_PIP_ARGS`.

    Raises:
        subprocess.CalledProcessError: venv creation or pip failed.
        RuntimeError: the install pulled in torch (HTA 0.5.0 does not need it).
    """
    python = _venv_python(venv)
    info = hta_venv_info(venv)
    if info is not None and info.get("pip_args") == list(HTA_PIP_ARGS) and python.exists():
        return python
    if venv.exists():
        shutil.rmtree(venv)
    t0 = time.perf_counter()
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *HTA_PIP_ARGS], check=True)
    created_s = time.perf_counter() - t0
    versions = _package_versions(python)
    if "torch" in versions:
        raise RuntimeError(f"{venv}: pip install {' '.join(HTA_PIP_ARGS)} pulled torch {versions['torch']}")
    stamp = {
        "pip_args": list(HTA_PIP_ARGS),
        "command": shlex.join([base_python, "-m", "venv", str(venv)]) + " && "
        + shlex.join([str(python), "-m", "pip", "install", *HTA_PIP_ARGS]),
        "created_s": round(created_s, 1),
        "size_bytes": _dir_bytes(venv),
        "versions": versions,
    }
    (venv / VENV_STAMP).write_text(json.dumps(stamp, indent=1))
    return python


def _tree_pids(root: int) -> list[int]:
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return pids


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE_BYTES
    except OSError:
        return 0


class _TreeSampler(threading.Thread):
    """Polls the summed PSS of a process tree and keeps the peak."""

    def __init__(self, root: int, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.root, self.interval_s = root, interval_s
        self.peak_bytes = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        wait_s = 0.005  # doubles up to interval_s, so short children get sampled too
        while not self._stop_event.is_set():
            total = sum(_pss_bytes(pid) for pid in _tree_pids(self.root))
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop_event.wait(wait_s)
            wait_s = min(2 * wait_s, self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def measure_child(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    log_path: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 900.0,
    sample_s: float = 0.1,
) -> ChildRun:
    """Run `cmd` (stdout and stderr to `log_path`), timing it and tracking its memory.

    The child gets its own session; past `timeout_s` that process group (the
    child and whatever it forked) is killed and the run is marked timed out.
    """
    timed_out = threading.Event()

    def kill_group(pid: int) -> None:
        timed_out.set()
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        sampler = _TreeSampler(proc.pid, sample_s)
        sampler.start()
        killer = threading.Timer(timeout_s, kill_group, args=(proc.pid,))
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
            sampler.stop()
        wall_s = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(
        wall_s=round(wall_s, 4),
        peak_rss_bytes=usage.ru_maxrss * 1024,
        peak_tree_pss_bytes=sampler.peak_bytes,
        returncode=proc.returncode,
        timed_out=timed_out.is_set(),
        log_path=str(log_path),
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _hta_run_from_records(trace_dir: Path, child: ChildRun, records: list[dict[str, Any]]) -> HtaRun:
    loaded = next((r for r in records if r["kind"] == "loaded"), {})
    done = next((r for r in records if r["kind"] == "done"), {})
    steps = tuple(
        HtaStep(
            rank=r["rank"], step=r["step"], ok=r["ok"], error=r["error"],
            cp_length_us=r.get("cp_length_us"), cp_span_us=r.get("cp_span_us"), seconds=r["seconds"],
        )
        for r in records
        if r["kind"] == "step"
    )
    return HtaRun(
        trace_dir=str(trace_dir),
        child=child,
        hta_version=loaded.get("hta_version", "?"),
        files=len(trace_files(trace_dir)),
        ranks=tuple(loaded.get("ranks", ())),
        events=sum(loaded.get("events_per_rank", {}).values()),
        import_s=loaded.get("import_s"),
        load_s=loaded.get("load_s"),
        cp_s=done.get("cp_s"),
        worker_s=done.get("worker_s"),
        steps_found=loaded.get("steps_found", 0),
        steps=steps,
    )


def _run_dir(kind: str, trace_dir: Path, work_dir: Path) -> Path:
    run_dir = work_dir / f"{kind}-{trace_dir.name}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    return run_dir


def run_hta(
    trace_dir: Path,
    *,
    venv: Path = DEFAULT_HTA_VENV,
    timeout_s: float = 900.0,
    budget_s: float | None = None,
    work_dir: Path = WORK_DIR / "runs",
) -> HtaRun:
    """Measure HTA computing the critical path of every step of every rank in `trace_dir`.

    Args:
        trace_dir: folder of trace files, one per rank (read only; HTA writes nothing there).
        venv: the HTA virtual environment, made on first use.
        timeout_s: hard limit on the child; a killed run keeps the steps it finished.
        budget_s: stop starting critical path calls after this many seconds of them;
            `HtaRun.estimated_wall_s` then scales the per-step cost to all steps.
        work_dir: where the run's folder (`hta-<trace folder name>`: HTA log and
            results) is made; the child also runs there, since HTA reads
            `./trace_analyzer.json` from its working directory.
    """
    trace_dir = Path(trace_dir).resolve()
    python = ensure_hta_venv(venv)
    run_dir = _run_dir("hta", trace_dir, work_dir)
    result_path = run_dir / "result.jsonl"
    cmd: list[str | os.PathLike[str]] = [python, HTA_WORKER, trace_dir, result_path]
    if budget_s is not None:
        cmd += ["--budget-s", str(budget_s)]
    child = measure_child(cmd, log_path=run_dir / "hta.log", cwd=run_dir, timeout_s=timeout_s)
    return _hta_run_from_records(trace_dir, child, _read_jsonl(result_path))


def run_parse_floor(
    trace_dir: Path,
    *,
    python: str = sys.executable,
    keep_gc: bool = False,
    timeout_s: float = 900.0,
    work_dir: Path = WORK_DIR / "runs",
) -> ParseFloorRun:
    """Measure a child that gunzips and `orjson.loads` every trace file of `trace_dir`, one at a time.

    The child turns the cyclic garbage collector off around each `orjson.loads`
    (what a loader that cares does) unless `keep_gc`; see `_parse_floor_worker.py`.

    Raises:
        RuntimeError: the child failed or timed out (its log is named).
    """
    trace_dir = Path(trace_dir).resolve()
    run_dir = _run_dir("parse-floor-gc" if keep_gc else "parse-floor", trace_dir, work_dir)
    result_path = run_dir / "result.json"
    files = trace_files(trace_dir)
    cmd = [python, PARSE_FLOOR_WORKER, result_path, *(["--keep-gc"] if keep_gc else []), *files]
    child = measure_child(cmd, log_path=run_dir / "parse-floor.log", cwd=run_dir, timeout_s=timeout_s)
    if child.returncode != 0 or not result_path.is_file():
        raise RuntimeError(f"{trace_dir}: parse floor child failed (rc {child.returncode}), see {child.log_path}")
    res = json.loads(result_path.read_text())
    return ParseFloorRun(trace_dir=str(trace_dir), child=child, **res)


def main(argv: list[str]) -> int:
    """`python benchmarks/_hta_peer.py TRACE_DIR [--budget-s S] [--timeout-s S]`: both peers, as JSON."""
    if len(argv) < 2:
        print(main.__doc__, file=sys.stderr)
        return 2
    trace_dir = Path(argv[1])
    budget_s = float(argv[argv.index("--budget-s") + 1]) if "--budget-s" in argv else None
    timeout_s = float(argv[argv.index("--timeout-s") + 1]) if "--timeout-s" in argv else 900.0
    ensure_hta_venv()
    floor = run_parse_floor(trace_dir)
    floor_gc = run_parse_floor(trace_dir, keep_gc=True)
    hta = run_hta(trace_dir, timeout_s=timeout_s, budget_s=budget_s)
    out = {
        "hta_venv": hta_venv_info(),
        "parse_floor": floor.to_dict(),
        "parse_floor_gc_on": floor_gc.to_dict(),
        "hta": hta.to_dict(),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
