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
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.truth.injection import parse_injection
from tests.agent.cases import workspace


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
    with workspace(tmp_path_factory.mktemp("eval_home")) as settings:
        yield settings


def stalled_job(folder: Path) -> Path:
    """A synthetic 2-rank job in ``folder`` whose rank 1 waits 40 ms on its data loader in step 2."""
    synthesize(folder, SynthConfig(model="gpt2-small", dp=2, steps=4,
                                   injections=(parse_injection("dataloader_stall@2:1=40ms"),)), workers=1)
    return folder
