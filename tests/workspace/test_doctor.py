"""The doctor's checks, run for real: a missing module, a binary that cannot run, an unreachable Neo4j."""

from __future__ import annotations

import os
from pathlib import Path

from bottleneck_oracle.config import Settings
from bottleneck_oracle.workspace import doctor


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({**os.environ, "ORACLE_HOME": str(tmp_path / "ws"), **env})


def test_a_missing_extra_names_the_module_and_the_setup(tmp_path: Path) -> None:
    check = doctor._extra("nothing", "no_such_module_anywhere")(_settings(tmp_path))
    assert not check.ok and check.required and "no_such_module_anywhere" in check.detail
    assert "make setup" in check.fix and ".[nothing]" in check.fix
    assert doctor._extra("capture", "torch")(_settings(tmp_path)).ok


def test_a_falkordb_binary_that_cannot_run_fails_before_starting(tmp_path: Path) -> None:
    binary = tmp_path / "redis-server"
    binary.write_text("#!/bin/sh\n")  # there, but not executable
    check = doctor._falkordb(_settings(tmp_path, ORACLE_FALKORDB_SERVER=str(binary)))
    assert not check.ok and str(binary) in check.detail and "ORACLE_FALKORDB_SERVER" in check.fix
    assert not (tmp_path / "ws").exists()  # nothing was started in the workspace


def test_an_unreachable_neo4j_says_which_settings_to_check(tmp_path: Path) -> None:
    check = doctor._neo4j(_settings(tmp_path, NEO4J_PASSWORD="x"), "bolt://127.0.0.1:9")
    assert not check.ok and "bolt://127.0.0.1:9" in check.detail and "NEO4J_URI" in check.fix


def test_each_result_is_seen_in_order_as_it_comes(tmp_path: Path) -> None:
    seen = []
    done = doctor.run_checks(_settings(tmp_path), checks=[doctor._python, doctor._disk], each=seen.append)
    assert [c.name for c in done] == ["python", "disk"] == [c.name for c in seen]
    assert all(c.ok and c.seconds >= 0 for c in done)
    assert str(tmp_path) in done[1].detail  # the workspace's nearest existing folder


def test_every_extra_of_pyproject_is_checked() -> None:
    import tomllib

    from tests.conftest import REPO

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(doctor.EXTRAS) == set(extras)
