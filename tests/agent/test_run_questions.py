"""Questions about the whole run, asked of a new trace through the library (no CLI resolving it first):
Kineto's public ResNet-50 run with a single-process data loader. The run's verdict leads, a yes/no question
is answered yes or no first, and the round's tools, run at once, load the trace once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import stop_server
from tests.conftest import DATA

LOADER0 = DATA / "resnet50_loader_workers" / "june" / "nw0"


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from bottleneck_oracle.agent.conversation import Conversation

    home: Path = tmp_path_factory.mktemp("run_questions")
    with Conversation(Settings(home=home, workers=1), trace=str(LOADER0)) as c:
        yield c
    stop_server(home)


def test_why_is_my_training_slow_answers_about_the_run(conversation: Any) -> None:
    a = conversation.ask("why is my training slow?")  # its first round: job_bound and explain_step at once
    assert a.answered and a.grounded, a.answer
    assert [c["name"] for c in a.tool_calls] == ["job_bound", "explain_step"]
    assert a.verdict.startswith("The run is input-bound") and "fix dataloader_stall" in a.verdict
    assert "not abnormal" in a.answer  # the slowest step is a detail, and not a cause


def test_did_any_step_run_abnormally_long_is_answered_no_first(conversation: Any) -> None:
    a = conversation.ask("Did any iteration run abnormally long?")
    assert a.answered and a.grounded, a.answer
    assert a.verdict.startswith("No: the slowest step (5)") and "1.25x" in a.answer


def test_a_step_like_the_others_gives_the_runs_verdict(conversation: Any) -> None:
    a = conversation.ask("why is step 6 slow?")
    assert a.verdict.startswith("Step 6 is not anomalous") and "the run as a whole: The run is input-bound" in a.answer


@pytest.mark.parametrize(("question", "first"), [("Is my job GPU-bound?", "No: The run is input-bound"),
                                                 ("Is the run limited by data loading?", "Yes: The run is input-bound"),
                                                 ("Is the job GPU-bound or input-bound?", "The run is input-bound")])
def test_a_bound_asked_yes_or_no_is_answered_yes_or_no_first(conversation: Any, question: str, first: str) -> None:
    a = conversation.ask(question)
    assert a.answered and a.grounded and a.verdict.startswith(first), a.answer
