"""One run verdict on every surface: ``oracle analyze --json``, ``oracle diff`` (each side) and ``oracle ask``
state the same verdict, word for word, for every shared public trace and every capture the tests keep."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.workspace.diff import diff_traces
from tests.conftest import DATA, REPO, WILD, run_oracle

RESNET = DATA / "resnet50_loader_workers"
QUESTION = "What is the main bottleneck of this training job?"


def _trace_folders() -> list[Path]:
    """Every folder of traces: the shared public ones, ours, the captures and the public GPU pairs."""
    roots = [p.parent for p in WILD.rglob("*.json.gz")] if WILD.is_dir() else []
    roots += [p.parent for p in (DATA / "wild").rglob("*.json*")]
    roots += [p.parent for p in DATA.glob("*/*.pt.trace.json.gz")]
    roots += [p.parent for p in RESNET.glob("*/nw*/*.json.gz")] + [p.parent for p in DATA.glob("diff_pair/*/*.gz")]
    return sorted(set(roots) | {REPO / "examples" / "gpt_2rank"})


def _id(p: Path) -> str:
    return str(p.relative_to(WILD if p.is_relative_to(WILD) else REPO))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    h = tmp_path_factory.mktemp("surfaces")
    yield h
    stop_server(h)


@pytest.mark.parametrize("folder", _trace_folders(), ids=_id)
def test_analyze_and_diff_state_the_same_verdict(folder: Path, home: Path) -> None:
    out = run_oracle("analyze", folder, "--json", env={**os.environ, "ORACLE_HOME": str(home)})
    assert out.returncode == 0, out.stderr
    analyzed = json.loads(out.stdout)["run_verdict"]
    compared = diff_traces(folder, folder, Settings(home=home, workers=1)).to_json()
    for side in ("base_verdict", "new_verdict"):
        assert compared[side]["verdict"] == analyzed["verdict"], (side, compared[side], analyzed)
        assert compared[side]["headline"] == analyzed["headline"]


@pytest.mark.parametrize("folder", [RESNET / "june" / "nw0", RESNET / "june" / "nw4", REPO / "examples" / "gpt_2rank"],
                         ids=_id)
def test_ask_states_the_verdict_analyze_states(folder: Path, home: Path) -> None:
    env = {**os.environ, "ORACLE_HOME": str(home)}
    analyzed = json.loads(run_oracle("analyze", folder, "--json", env=env).stdout)["run_verdict"]
    out = run_oracle("ask", QUESTION, "--json", "--trace", folder, env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == analyzed["headline"] and doc["grounded"], doc["answer"]
    why = json.loads(run_oracle("ask", "why is my training slow?", "--json", "--trace", folder.name, env=env).stdout)
    assert why["verdict"] == analyzed["headline"]  # no step named: the run's answer, not a step's
