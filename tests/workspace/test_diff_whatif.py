"""What-if between runs on a real captured pair (``tests/data/diff_pair``: the GPT job with and without a
150 ms data-loading stall in every step): the fix of the stall, applied to the slow run, predicts the
fast one; the cause comes before its symptom (the late rank); an unchanged pair gets none."""

from __future__ import annotations

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.workspace.diff import Compared, diff_traces
from bottleneck_oracle.workspace.diff_whatif import CLOSE_PCT, whatif_between
from tests.conftest import DATA

PAIR = DATA / "diff_pair"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings.from_env({"ORACLE_HOME": str(tmp_path_factory.mktemp("home"))})


@pytest.fixture(scope="module")
def pair(settings: Settings) -> Compared:
    return diff_traces(PAIR / "base", PAIR / "stall", settings)


def test_the_stall_fix_on_the_slow_run_predicts_the_fast_one(pair: Compared) -> None:
    w = pair.whatif
    assert w is not None and w["applied_to"] == "new" and w["predicts"] == "base"
    assert w["edit"] == "fix dataloader_stall" and w["close"]
    assert w["target_ms"] == pair.diff.base["median_ms"] and w["from_ms"] == pair.diff.new["median_ms"]
    # the replay removes nearly all of the 150 ms stall: within CLOSE_PCT of the clean run
    assert abs(w["error_pct"]) <= CLOSE_PCT
    assert w["predicted_ms"] < w["from_ms"] - 100
    edits = [c["edit"] for c in w["candidates"]]
    assert edits.index("fix dataloader_stall") < edits.index("fix straggler_rank")  # cause, then symptom


def test_the_other_direction_fixes_base(pair: Compared, settings: Settings) -> None:
    back = diff_traces("stall", "base", settings)
    assert back.diff.verdict == "faster"
    flipped = whatif_between(back.diff, pair.new.analysis, pair.base.analysis)
    assert flipped is not None and flipped["applied_to"] == "base" and flipped["edit"] == "fix dataloader_stall"
    assert flipped["predicted_ms"] == pair.whatif["predicted_ms"]  # type: ignore[index]


def test_a_run_against_itself_has_no_whatif(pair: Compared, settings: Settings) -> None:
    same = diff_traces("base", "base", settings)
    assert same.diff.verdict == "unchanged" and same.whatif is None and same.to_json()["whatif"] is None

