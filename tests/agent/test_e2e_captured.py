"""The agent end to end on real CPU captures (the project's GPT job, two gloo ranks, DDP): for every
fault a capture injects, "why is step N slow?" asked offline names the cause the analysis found, its
step, rank and a culprit op, grounded; on a clean capture it says no step is anomalous.

The agent must agree with the analysis, not beat it: where the analysis reports another category
than the one injected (a known limit on gloo captures), the test expects what the analysis says.
The captures are committed under ``tests/data/gloo_*`` (recorded once, ``tests/captured_data.py``),
so the verdict depends on the code alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.config import Settings
from bottleneck_oracle.truth.injection import parse_injection
from tests.agent.cases import (
    analysis_cause,
    ask,
    assert_names_cause,
    assert_not_anomalous,
    folder_of,
    workspace,
)
from tests.captured_data import BY_INJECTION, captured

# injection -> (the category the analysis reports as the step's cause, or those it may, the ranks it blames)
FAULTS: dict[str, tuple[str | tuple[str, ...], tuple[int, ...]]] = {
    "host_pause@4:0=150ms": ("host_pause", (0,)),
    # the late rank's own pause comes first, then the straggler it made (tests/analysis/test_captured.py):
    # the sleep at the step's start is a host_pause on rank 1, and the straggler_rank finding follows it
    "straggler_rank@4:1=150ms": ("host_pause", (1,)),
    "dataloader_stall@4:0=150ms": ("dataloader_stall", (0,)),
    # a save whose write returns before the time it waits on shows: the rank's gap is then untraced
    # host time (seen as a host_pause on live captures)
    "checkpoint_stall@4:1=64MB": (("checkpoint_stall", "host_pause"), (1,)),
    "slow_compute@4:1=4x": ("slow_compute", (1,)),
    # a blocking all-reduce on gloo: the main thread's wait on it is communication (graph/points.py), on
    # both ranks (the cause names one, the other waited beside it)
    "exposed_communication@4=128MB": ("exposed_communication", ()),
}


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """One workspace for the module: every capture is ingested by the agent the first time it is asked."""
    with workspace(tmp_path_factory.mktemp("captured_home")) as s:
        yield s


@pytest.fixture(scope="module", params=sorted(FAULTS), ids=lambda i: i.split("@")[0])
def faulty(request: pytest.FixtureRequest) -> tuple[str, Analysis]:
    """The committed capture of one injected category, analysed."""
    inject: str = request.param
    return inject, captured(BY_INJECTION[inject].name)


@pytest.fixture(scope="module")
def clean() -> Analysis:
    """The committed capture with no fault."""
    return captured("gloo_clean")


def test_why_slow_names_the_injected_fault(faulty: tuple[str, Analysis], settings: Settings) -> None:
    inject, a = faulty
    expected, ranks = FAULTS[inject]
    step = parse_injection(inject).step
    found = analysis_cause(a, step)
    (answer,) = ask(settings, folder_of(a), f"Why is step {step} slow?")
    assert found is not None, f"the analysis found no cause of step {step}"  # the take shows its fault clearly
    category = found.category.value
    assert category in ((expected,) if isinstance(expected, str) else expected)  # known limits included (FAULTS)
    assert_names_cause(answer, category=category, step=step, ranks=ranks)
    # the agent says what the analysis found: the same ranks, the same culprit ops
    assert answer.cause is not None
    assert answer.cause["ranks"] == list(found.ranks) and answer.cause["ops"] == list(found.ops)
    assert answer.suggestions and category in answer.suggestions[0]["edit"]


def test_clean_capture_step_is_not_anomalous(clean: Analysis, settings: Settings) -> None:
    step_answer, trace_answer = ask(settings, folder_of(clean), "Why is step 4 slow?",
                                    "Is anything wrong with this trace?")
    assert_not_anomalous(step_answer)
    assert step_answer.step == 4 and "Step 4" in step_answer.answer
    assert_not_anomalous(trace_answer)

