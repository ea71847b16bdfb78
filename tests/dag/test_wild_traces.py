"""Every public trace of another project (``wild/``) goes through ``oracle analyze --json``: exit 0, every
step with a wall time, and the trace's limits stated in ``trace.health``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import WILD, run_oracle

TRACES = sorted(WILD.glob("**/trace.json.gz"))


def _categories(path: Path) -> set[str]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return {e.get("cat") for e in doc["traceEvents"] if e.get("ph") == "X"}


def test_the_wild_folders_are_there() -> None:
    assert len(TRACES) >= 10, f"public traces not found under {WILD}"


@pytest.mark.parametrize("path", TRACES, ids=[str(p.parent.relative_to(WILD)) for p in TRACES])
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
    assert "no_gpu" not in codes  # all of them are GPU traces
