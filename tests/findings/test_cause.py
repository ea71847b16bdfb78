"""The cause of a step across ranks (findings/cause.py): the rank that delayed the step, what delayed it, and
the ranks that waited for it, on synthetic jobs whose fault is known and on the committed gloo captures."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.findings.cause import late_ranks
from bottleneck_oracle.graph.collectives import collective_arrivals
from bottleneck_oracle.graph.types import Bottleneck
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.injection import parse_injection
from tests.captured_data import captured
from tests.analysis.synth_cases import synth_case

DP2 = {"model": "gpt2-small", "dp": 2}


@cache
def one_step_pause() -> Analysis:
    """One recorded step of an 8-rank job (a 1B model, ~190 ms a step) where rank 3's host pauses 25 ms
    mid-forward: it launches its gradient all-reduce late and the seven others wait inside the NCCL
    kernel. Too short a pause for the detectors (no other step to compare with, under a quarter of the
    step), which found nothing here."""
    out = Path(tempfile.mkdtemp(prefix="oracle-cause-"))
    synthesize(out, SynthConfig(model="1b", dp=8, steps=1, injections=(parse_injection("host_pause@1:3=25ms"),)))
    return analyze(read_trace(out))


def test_a_late_ranks_pause_is_the_cause_with_the_ranks_that_waited() -> None:
    a = one_step_pause()
    (step,) = {r.step for r in a.steps}
    cause = a.cause(step)
    assert cause is not None and cause.category == Bottleneck.HOST_PAUSE and cause.ranks == (3,)
    assert cause.impact_ms == pytest.approx(25.0, rel=0.1)
    assert cause.waiting == (0, 1, 2, 4, 5, 6, 7)
    assert all(w == pytest.approx(25.0, rel=0.1) for w in cause.waited_ms)
    assert cause.ops and "aten::" in cause.ops[0]  # the ops around the pause on rank 3's thread
    # the rank explained is the one that paused, not the longest one (a waiter)
    longest = max((r for r in a.steps if r.step == step), key=lambda r: r.wall_ns)
    assert longest.rank != 3 or cause.ranks == (3,)


def test_late_ranks_measure_each_waiters_longest_wait() -> None:
    a = one_step_pause()
    (late, *_) = late_ranks(collective_arrivals(a.graph))[1]
    assert late.rank == 3 and sorted(late.waited_ns) == [0, 1, 2, 4, 5, 6, 7]
    assert late.longest_ns == pytest.approx(25e6, rel=0.1)


@pytest.mark.parametrize("inject,category", [
    ("straggler_rank@3:1=40ms", Bottleneck.HOST_PAUSE),  # a delay at the step's start: the host idles
    ("host_pause@3:1=40ms", Bottleneck.HOST_PAUSE),
    ("dataloader_stall@3:1=40ms", Bottleneck.DATALOADER_STALL),
    ("slow_compute@3:1=3x", Bottleneck.SLOW_COMPUTE),
    ("host_sync@3:1=20ms", Bottleneck.HOST_SYNC),
])
def test_what_made_a_rank_late_is_the_cause_on_that_rank(inject: str, category: Bottleneck) -> None:
    a, _ = synth_case(inject=inject, **DP2)
    cause = a.cause(3)
    assert cause is not None and (cause.category, cause.ranks) == (category, (1,))
    assert cause.waiting == (0,) and cause.waited_ms[0] > 5.0  # rank 0 waited in the all-reduce
    causes = [f.step for f in a.findings if f.cause]  # one per step, of slow steps only
    assert sorted(causes) == sorted(set(causes)) and set(causes) <= {s.step for s in a.slow_steps}


def test_a_collective_every_rank_waits_in_is_exposed_communication() -> None:
    a, _ = synth_case(inject="exposed_communication@3=8192MB", hardware="A100", **DP2)
    cause = a.cause(3)
    assert cause is not None and cause.category == Bottleneck.EXPOSED_COMMUNICATION
    assert set(cause.ranks + cause.waiting) == {0, 1} and len(cause.waited_ms) == 1


def test_a_step_that_is_not_slow_has_no_cause() -> None:
    a, _ = synth_case(inject="host_pause@3:1=40ms", **DP2)
    assert all(a.cause(s) is None for s in {r.step for r in a.steps} - {3})
    assert not [f for f in captured("gloo_clean").findings if f.cause]


# committed capture -> (cause, its rank, the rank that waited for it)
CAPTURED = {
    "gloo_host_pause": (Bottleneck.HOST_PAUSE, 0, 1),
    "gloo_straggler_rank": (Bottleneck.HOST_PAUSE, 1, 0),  # rank 1 slept at the step's start
    "gloo_dataloader_stall": (Bottleneck.DATALOADER_STALL, 0, 1),
    "gloo_slow_compute": (Bottleneck.SLOW_COMPUTE, 1, 0),
    # on a loaded machine rank 1's straggler finding (the lateness, capped by the step's excess) came out
    # larger than its slow compute: the lateness is what the compute made, not a cause of its own
    "gloo_slow_rank_loaded": (Bottleneck.SLOW_COMPUTE, 1, 0),
}


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_captured_faults_are_caused_on_their_rank(name: str) -> None:
    category, rank, waiter = CAPTURED[name]
    cause = captured(name).cause(4)
    assert cause is not None and (cause.category, cause.ranks) == (category, (rank,))
    assert cause.waiting == (waiter,) and cause.waited_ms[0] > 50.0  # the faults are 150 ms or 4x


def test_a_blocking_all_reduce_on_gloo_is_the_cause_on_both_ranks() -> None:
    cause = captured("gloo_exposed_communication").cause(4)
    assert cause is not None and cause.category == Bottleneck.EXPOSED_COMMUNICATION
    assert sorted(cause.ranks + cause.waiting) == [0, 1]


def test_a_pipeline_waiting_behind_a_stall_of_every_stage_is_caused_by_the_stall() -> None:
    """Every rank of a 2-stage pipeline stalls 150 ms in its data loader in step 2: each stage's GPU idles
    as long waiting on send/recv, and the pipeline bubbles weigh as much as the stall (150.1 against 150.0
    ms on 16 ranks, where the bubble was named). The bubble waited for the stall: the stall is the cause."""
    a, _ = synth_case("1b", dp=2, pp=2, microbatches=4, inject="dataloader_stall@2=150ms")
    bubbles = [f for f in a.findings if f.step == 2 and f.category == Bottleneck.PIPELINE_BUBBLE]
    assert bubbles and max(f.impact_ms for f in bubbles) >= 0.9 * 150
    cause = a.cause(2)
    assert cause is not None and cause.category == Bottleneck.DATALOADER_STALL and sorted(cause.ranks) == [0, 1, 2, 3]
