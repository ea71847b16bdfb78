"""Shared fixtures of the harness's tests: the default case set, made once a session, and a
workspace with its own embedded FalkorDB server (stopped at the end)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.cases import load_cases
from bottleneck_oracle.evals.make_cases import make_cases
from bottleneck_oracle.evals.types import Case
from bottleneck_oracle.graphdb import stop_server


@pytest.fixture(scope="session")
def case_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder ``make_cases`` wrote the default set into (about 10 s on 2 cores)."""
    out = tmp_path_factory.mktemp("eval_cases")
    make_cases(out, workers=2)
    return out


@pytest.fixture(scope="session")
def default_cases(case_dir: Path) -> dict[str, Case]:
    """The default set by id, read back from its case files."""
    return {c.id: c for c in load_cases(case_dir / "cases")}


@pytest.fixture(scope="session")
def eval_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A fresh workspace; its FalkorDB server starts on first use and stops at the end."""
    home = tmp_path_factory.mktemp("eval_home")
    try:
        yield Settings(home=home, workers=2)
    finally:
        stop_server(home)
