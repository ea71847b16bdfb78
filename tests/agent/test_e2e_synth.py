"""The agent end to end on synthetic GPU jobs (the simulator's traces, truth known): the four
categories only GPU ranks show (host_sync, launch_overhead, pipeline_bubble, exposed_communication),
each asked "why is step 3 slow?" offline, must come back as the injected cause at its step, on its
rank where one rank was hit, with a culprit op, grounded; and "what should I change first?" must
put the fix of that cause first, with its predicted gain and the predictor that made it.

The jobs and faults are those the detectors are known to find (tests/findings/test_detection.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from tests.agent.cases import ask, assert_grounded, assert_names_cause, synth_job, workspace

pytestmark = pytest.mark.slow  # 35 s on 2 cores: the server, the sentence model and five agent turns

STEP = 3
DP2 = {"model": "gpt2-small", "dp": 2}
# injection -> (the job, the ranks the cause must name: () when the fault hits every rank)
JOBS: dict[str, tuple[dict[str, object], tuple[int, ...]]] = {
    "host_sync@3:1=20ms": (DP2, (1,)),
    "launch_overhead@3:1=8x": (DP2, (1,)),
    "pipeline_bubble@3=20ms": ({"model": "tiny", "pp": 2, "microbatches": 4}, ()),
    "exposed_communication@3=8192MB": ({**DP2, "hardware": "A100"}, ()),
}


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with workspace(tmp_path_factory.mktemp("synth_home")) as s:
        yield s


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each job's trace folder, generated once for the module."""
    root = tmp_path_factory.mktemp("synth_jobs")
    return {inject: synth_job(root / inject.split("@")[0], inject, **job) for inject, (job, _) in JOBS.items()}


@pytest.mark.parametrize("inject", sorted(JOBS), ids=lambda i: i.split("@")[0])
def test_why_slow_names_the_injected_gpu_fault(inject: str, jobs: dict[str, Path], settings: Settings) -> None:
    (answer,) = ask(settings, jobs[inject], f"Why is step {STEP} slow?")
    category = inject.split("@")[0]
    assert_names_cause(answer, category=category, step=STEP, ranks=JOBS[inject][1])
    fix = answer.suggestions[0]
    assert category in fix["edit"] and fix["gain_ms"] > 0, answer.suggestions


def test_change_first_fixes_the_cause(jobs: dict[str, Path], settings: Settings) -> None:
    inject = "host_sync@3:1=20ms"
    (answer,) = ask(settings, jobs[inject], "What should I change first?")
    assert_grounded(answer)
    assert answer.intent == "optimize" and [c["name"] for c in answer.tool_calls] == ["optimize"]
    first = answer.suggestions[0]
    assert first["edit"].startswith("fix host_sync"), answer.suggestions
    assert first["gain_ms"] > 0 and first["predictor"], first
    assert first["predicted_ms"] > 0 and f"`{first['edit']}`" in answer.answer
    # the gain is about the fault injected (20 ms of syncs on one rank, blocking the other at the all-reduce)
    assert first["gain_ms"] == pytest.approx(20, rel=0.35)


def test_a_job_of_many_ranks_is_answered_from_tool_results_cut_to_fit(
        tmp_path_factory: pytest.TempPathFactory, settings: Settings) -> None:
    """16 ranks on 2 nodes: the stragglers of a step and the step's explanation are larger than a tool result
    may be. They were cut mid-JSON, and the answers failed ('internal error: KeyError') or said the trace had
    no GPU; now their lists are cut to fit, every key kept, and each question is answered, grounded."""
    job = synth_job(tmp_path_factory.mktemp("many_ranks"), "straggler_rank@3:9=30ms", model="tiny", dp=4, tp=4)
    straggler, why, busy = ask(settings, job, "Which rank is the straggler?", f"Why is step {STEP} slow?",
                               f"How busy is the GPU in step {STEP}?")
    for answer in (straggler, why, busy):
        assert_grounded(answer)
    assert "Rank 9 is the straggler in step 3" in straggler.answer
    assert "the GPU was busy" in busy.answer and "no GPU events" not in busy.answer


def test_a_late_rank_and_a_stall_of_every_rank_are_each_answered_where_they_are(
        tmp_path_factory: pytest.TempPathFactory, settings: Settings) -> None:
    """Rank 1 straggles in step 2 and every rank's data loader stalls 150 ms in step 4. 'Which rank is the
    straggler?' looked at the slowest step (4, no straggler) and said none did; 'why is step 4 slow?' named
    the stall on the one rank the critical path ran through, and its fix saved 0.04 ms: the next rank's
    stall bound. Now the straggler is rank 1 in step 2, and the stall is fixed on every rank."""
    job = synth_job(tmp_path_factory.mktemp("late_and_stalled"), "straggler_rank@2:1;dataloader_stall@4=150ms",
                    model="tiny", dp=4, steps=6)
    straggler, why = ask(settings, job, "Which rank is the straggler?", "Why is step 4 slow?")
    for answer in (straggler, why):
        assert_grounded(answer)
    assert "Rank 1 is the straggler in step 2" in straggler.answer, straggler.answer
    assert_names_cause(why, category="dataloader_stall", step=4)
    assert sorted(why.cause["ranks"]) == [0, 1, 2, 3] and "with it" in why.answer
    assert why.suggestions[0]["gain_ms"] == pytest.approx(150, rel=0.05), why.suggestions
