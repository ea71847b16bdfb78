"""Shared fixtures: where the real traces are, a local Ray, and a CPU budget for tests that train."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples every run (HYPOTHESIS_PROFILE=explore draws new ones, by
# hand): a verdict of make test depends on the code, never on which inputs chance drew this time.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ORACLE_SHARED", REPO.parent / "shared"))
REAL = SHARED / "traces" / "real"
WILD = SHARED / "traces" / "wild"  # public GPU traces of other projects, some with TraceLens's own answers
STRAGGLERS = SHARED / "traces" / "stragglers"  # a paper's pipeline jobs (op tables) with its published results
DATA = REPO / "tests" / "data"  # small real captures kept with the tests
NEO4J_URI = os.environ.get("NEO4J_URI", "")

# The one marker for tests that need a Neo4j 5 server: they run when NEO4J_URI is set (with
# NEO4J_USERNAME and NEO4J_PASSWORD), else they are skipped and -ra prints this reason.
requires_neo4j = pytest.mark.skipif(
    not NEO4J_URI, reason="NEO4J_URI is not set: the Neo4j runs need a Neo4j 5 server "
    "(set NEO4J_URI, NEO4J_USERNAME, NEO4J_PASSWORD)",
)


@pytest.fixture(scope="session")
def real_traces() -> Path:
    """The folder of real traces shared beside the checkout."""
    if not REAL.is_dir():
        pytest.fail(f"real traces not found at {REAL}: clone the repo beside ../shared")
    return REAL


def run_oracle(*args: object, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m bottleneck_oracle ARGS`` as a user runs it: a real process, its output and exit code."""
    return subprocess.run([sys.executable, "-m", "bottleneck_oracle", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def counted_reads(monkeypatch: pytest.MonkeyPatch) -> dict[Path, int]:
    """How many times a scan's tasks read each rank file (in this process: ``LocalExecutor(1)``)."""
    from bottleneck_oracle.job import scan_rounds

    reads: dict[Path, int] = {}
    read = scan_rounds.read_rank

    def counted(p: Path, named: bool):  # type: ignore[no-untyped-def]
        reads[p] = reads.get(p, 0) + 1
        return read(p, named)

    monkeypatch.setattr(scan_rounds, "read_rank", counted)
    return reads


@pytest.fixture(scope="module")
def ray_cluster():  # type: ignore[no-untyped-def]
    """A local Ray of two worker CPUs for the module's tests, the one the executor joins."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@contextmanager
def one_ray_task_killed(after_s: float = 0.0) -> Iterator[list[int]]:
    """Kills the worker process of the first Ray task caught running (Ray titles it ``ray::_measured``),
    ``after_s`` into it, while the block runs; yields the pids killed (one, once the block is done)."""
    import psutil

    killed: list[int] = []

    def kill() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for p in psutil.process_iter(["pid", "cmdline"]):
                if any("ray::_measured" in part for part in (p.info["cmdline"] or [])):
                    time.sleep(after_s)
                    p.kill()
                    killed.append(p.info["pid"])
                    return
            time.sleep(0.005)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        yield killed
    finally:
        killer.join()
