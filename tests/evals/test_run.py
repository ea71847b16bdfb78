"""Running suites by name: rootcause here, the others by their modules, a missing one named."""

from __future__ import annotations

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals import run as run_module
from bottleneck_oracle.evals.run import SUITES, run_suites
from bottleneck_oracle.evals.types import Case


def test_suites_are_the_six_of_the_issue_and_the_question_suite() -> None:
    assert SUITES == ("rootcause", "whatif", "optimize", "retrieval", "gnn", "latency", "questions")


def test_run_suites_refuses_an_unknown_suite(eval_settings: Settings) -> None:
    with pytest.raises(ConfigError) as e:
        run_suites([], eval_settings, ["speed"])
    assert str(e.value) == "unknown suite 'speed'; use one of " + ", ".join(SUITES)


def test_run_suites_says_a_suite_is_not_built(eval_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(run_module._RUNNERS, "gnn", ("no_such_suite", "run_gnn"))
    with pytest.raises(ConfigError) as e:
        run_suites([], eval_settings, ["gnn"])
    assert str(e.value) == "suite gnn is not built (no bottleneck_oracle.evals.no_such_suite)"


def test_run_suites_runs_rootcause_and_hands_its_answers_to_latency(default_cases: dict[str, Case],
                                                                    eval_settings: Settings) -> None:
    seen: list[str] = []
    out = run_suites([default_cases["clean_s1"]], eval_settings, ["latency", "rootcause"],
                     progress=lambda suite, done, total: seen.append(suite))
    assert list(out) == ["rootcause", "latency"]
    assert out["rootcause"].metrics["false_positive_rate"] == 0.0
    assert out["latency"].metrics["n"] == len(default_cases["clean_s1"].questions)  # timed from rootcause's rows
    assert "rootcause" in seen
