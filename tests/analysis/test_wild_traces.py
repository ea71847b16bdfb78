"""Every public trace of another project (``wild/``) goes through ``oracle analyze --json``: exit 0, every
step with a wall time, and the trace's limits stated in ``trace.health``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import DATA, WILD, run_oracle

OURS = DATA / "wild"  # more public traces, kept with the tests: the ones our reading once got wrong
TRACES = sorted([*WILD.glob("**/trace.json.gz"), *OURS.glob("**/trace.json.gz")])
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
READ_CATS = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver", "cuda_sync",
             "gpu_user_annotation", *GPU_CATS}
NO_OPS = {"Trace", "overhead"}  # window marks, the profiler's own overhead


def _categories(path: Path) -> set[str]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return {e.get("cat") for e in doc["traceEvents"] if e.get("ph") == "X"}


def test_the_wild_folders_are_there() -> None:
    assert len(TRACES) >= 10, f"public traces not found under {WILD}"


@pytest.mark.parametrize("path", TRACES, ids=[p.parent.name if p.is_relative_to(OURS) else str(p.parent.relative_to(WILD))
                                              for p in TRACES])
def test_wild_trace_analyses_with_its_limits_stated(path: Path) -> None:
    done = run_oracle("analyze", "--json", path)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert data["steps"] and all(s["wall_ms"] > 0 for s in data["steps"])
    codes = {n["code"] for n in data["trace"]["health"]}
    cats = _categories(path)
    assert ("python_stacks" in codes) == ("python_function" in cats)
    assert ("no_cpu_ops" in codes) == (not cats & {"cpu_op", "user_annotation"})
    assert ("no_steps" in codes) == (not data["trace"]["steps_annotated"])
    assert ("no_gpu" in codes) == (not cats & GPU_CATS)  # an MTIA trace's device events are not read...
    skipped = data["trace"]["skipped_events"]
    unread = {r.removeprefix("category not read: ") for r in skipped if r.startswith("category not read: ")}
    assert unread == cats - READ_CATS - NO_OPS - {None}  # ...and say so
