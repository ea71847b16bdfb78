"""The service behind ``oracle diff``: traces resolved as every command resolves them, and named baselines
kept in the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.workspace.diff import BASELINES_NAME, baselines, diff_traces, resolve_baseline, save_baseline
from tests.conftest import DATA

PAIR = DATA / "diff_pair"


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({"ORACLE_HOME": str(tmp_path / "home")})


def test_a_pair_by_path_then_by_name_from_the_cache(settings: Settings) -> None:
    first = diff_traces(PAIR / "base", PAIR / "stall", settings)
    assert first.diff.verdict == "slower" and not first.base.cached
    again = diff_traces(first.base.entry.trace_id, "stall", settings)
    assert again.base.cached and again.new.cached
    assert again.diff.to_json()["moved"] == first.diff.to_json()["moved"]


def test_a_baseline_names_a_trace(settings: Settings) -> None:
    saved = save_baseline("main", PAIR / "base", settings)
    assert baselines(settings) == {"main": saved.entry.trace_id}
    assert resolve_baseline("baseline:main", settings) == saved.entry.trace_id
    assert diff_traces("baseline:main", PAIR / "base", settings).diff.verdict == "unchanged"
    save_baseline("main", PAIR / "stall", settings)  # a new one of the same name replaces it
    assert diff_traces("baseline:main", PAIR / "stall", settings).diff.delta_ms == 0


def test_unknown_and_bad_baselines_are_one_line_errors(settings: Settings) -> None:
    with pytest.raises(NotFoundError, match="baseline 'nightly': not saved .*saved: none"):
        resolve_baseline("baseline:nightly", settings)
    with pytest.raises(ConfigError, match="give a word"):
        save_baseline("my base", PAIR / "base", settings)
    Path(settings.home).mkdir(parents=True, exist_ok=True)
    (Path(settings.home) / BASELINES_NAME).write_text("[1, 2")
    with pytest.raises(ConfigError, match="not a baselines file"):
        baselines(settings)
