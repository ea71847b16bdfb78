"""The service behind ``oracle diff``: traces resolved as every command resolves them, named baselines kept
in the workspace, the cause of a change and each run's verdict."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.whatif.run_verdict import run_verdict
from bottleneck_oracle.workspace.diff import (
    BASELINES_NAME,
    baselines,
    cause_of,
    diff_traces,
    resolve_baseline,
    save_baseline,
)
from tests.conftest import DATA

PAIR = DATA / "diff_pair"
RESNET = DATA / "resnet50_loader_workers" / "june"


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


def test_cause_of_the_stall_is_data_loading_and_its_finding_not_the_larger_symptom(settings: Settings) -> None:
    """The stall pair: straggler_rank moved more (166 ms) than dataloader_stall (151 ms), but the largest
    mover of the attribution is data loading, and the finding behind it is the one of that category."""
    slower = diff_traces(PAIR / "base", PAIR / "stall", settings)
    assert [f["category"] for f in slower.diff.moved["findings"]][0] == "straggler_rank"
    assert slower.cause() == {
        "category": "data_loading", "base_ms": 0.386, "new_ms": 151.051, "delta_ms": 150.666,
        "finding": "dataloader_stall", "change": "appeared", "ranks": [0], "finding_base_ms": 0.0,
        "finding_new_ms": 151.051,
        "words": "data loading rose from 0.4 to 151.1 ms a step: the dataloader_stall finding on rank(s) 0 appeared"}
    faster = diff_traces("stall", "base", settings)
    cause = faster.cause()
    assert cause is not None and cause["delta_ms"] == -150.666 and cause["change"] == "went away"
    assert cause["words"].startswith("data loading fell from 151.1 to 0.4 ms a step")
    assert faster.to_json()["cause"] == cause


def test_cause_of_an_unchanged_pair_is_none(settings: Settings) -> None:
    same = diff_traces(PAIR / "base", PAIR / "base", settings)
    assert same.diff.verdict == "unchanged" and same.cause() is None and same.to_json()["cause"] is None


def test_cause_of_takes_the_verdicts_direction_and_only_a_finding_that_moved_with_it(settings: Settings) -> None:
    d = diff_traces(PAIR / "base", PAIR / "stall", settings).diff  # slower
    rows = {"categories": [{"category": "cpu", "base_ms": 30.0, "new_ms": 10.0, "delta_ms": -20.0},
                           {"category": "idle", "base_ms": 1.0, "new_ms": 6.0, "delta_ms": 5.0}],
            "findings": [{"category": "host_pause", "ranks": [1], "change": "went away", "base_ms": 4.0,
                          "new_ms": 0.0, "delta_ms": -4.0}]}
    against = cause_of(replace(d, moved=d.moved | rows))
    assert against is not None and against["category"] == "idle" and against["finding"] is None  # cpu fell
    assert against["words"] == "idle time rose from 1 to 6 ms a step; no finding of it appeared or went away"
    grew = {"category": "host_pause", "ranks": [1], "change": "grew", "base_ms": 1.25, "new_ms": 5.5,
            "delta_ms": 4.25}
    with_it = cause_of(replace(d, moved=d.moved | rows | {"findings": [*rows["findings"], grew]}))
    assert with_it is not None and with_it["finding"] == "host_pause" and with_it["change"] == "grew"
    assert with_it["words"].endswith(": the host_pause finding on rank(s) 1 grew (1.2 to 5.5 ms a step)")
    assert cause_of(replace(d, moved=d.moved | {"categories": rows["categories"][:1]})) is None  # none rose


def test_host_work_that_rose_with_a_launch_overhead_finding_names_that_finding(settings: Settings) -> None:
    """A launch-overhead finding's fix takes the CPU ops that issue kernels (``replay/fix.py``), so when host
    work rises and that finding appears, it is the cause's finding, as the run's verdict counts it."""
    d = diff_traces(PAIR / "base", PAIR / "stall", settings).diff  # slower
    rows = {"categories": [{"category": "cpu", "base_ms": 10.0, "new_ms": 30.0, "delta_ms": 20.0}],
            "findings": [{"category": "launch_overhead", "ranks": [0], "change": "appeared", "base_ms": 0.0,
                          "new_ms": 18.0, "delta_ms": 18.0}]}
    cause = cause_of(replace(d, moved=d.moved | rows))
    assert cause is not None and cause["category"] == "cpu" and cause["finding"] == "launch_overhead"
    assert cause["words"] == ("host (CPU) work rose from 10 to 30 ms a step: the launch_overhead finding on rank(s) 0 "
                              "appeared")


def test_each_run_has_its_own_verdict(settings: Settings) -> None:
    c = diff_traces(PAIR / "base", PAIR / "stall", settings)
    assert c.base_verdict is not None and c.new_verdict is not None
    assert c.new_verdict.to_json() == run_verdict(c.new.analysis).to_json()
    doc = c.to_json()
    assert doc["base_verdict"] == c.base_verdict.to_json() and doc["new_verdict"]["verdict"] == c.new_verdict.verdict
    brief = c.brief()
    assert brief["new_verdict"]["headline"] == c.new_verdict.headline()
    assert brief["base_verdict"]["gpu_busy_pct"] is None  # a CPU job: no GPU work


def test_the_resnet_loader_workers_pair_names_the_stall_that_went_away(settings: Settings) -> None:
    """ResNet-50 on one GPU, DataLoader workers 0 (BASE) against 4 (NEW), real Kineto traces."""
    if not RESNET.is_dir():
        pytest.skip(f"{RESNET} is not there")
    c = diff_traces(RESNET / "nw0", RESNET / "nw4", settings)
    cause = c.cause()
    assert cause is not None
    assert {k: cause[k] for k in ("category", "delta_ms", "finding", "change", "words")} == {
        "category": "data_loading", "delta_ms": -58.816, "finding": "dataloader_stall", "change": "went away",
        "words": "data loading fell from 58.8 to 0 ms a step: the dataloader_stall finding went away"}
    assert c.base_verdict is not None and c.base_verdict.verdict == "input-bound"
    assert c.new_verdict is not None and c.new_verdict.verdict != "input-bound"
