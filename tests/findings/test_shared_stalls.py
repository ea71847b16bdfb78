"""Tests for findings/shared_stalls.py: a stall every rank had in one step is one finding on all of them,
on synthetic jobs whose stall is known, and a stall of one rank stays on that rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.findings.finding import Finding
from bottleneck_oracle.findings.shared_stalls import thread_excess
from bottleneck_oracle.graph.types import Bottleneck, Category
from bottleneck_oracle.traces import read_trace
from tests.analysis.synth_cases import synth_case

TINY4 = {"model": "tiny", "dp": 4}
STALLED = {"dataloader_stall": Category.DATA_LOADING, "host_pause": Category.IDLE}


def _of_step(findings: tuple[Finding, ...], category: str, step: int) -> list[Finding]:
    return [f for f in findings if f.category == category and f.step == step]


@pytest.mark.parametrize("category", sorted(STALLED))
def test_a_stall_of_every_rank_is_one_finding_on_every_rank(category: str) -> None:
    a, _ = synth_case(**TINY4, inject=f"{category}@2=150ms")
    (found,) = _of_step(a.findings, category, 2)  # not one per rank, and not only the rank on the path
    assert sorted(found.ranks) == [0, 1, 2, 3] and found.ranks[1:] == tuple(sorted(found.ranks[1:]))
    # the rank named first is the one the critical path ran through
    path_ranks = {int(k) for r in a.steps if r.step == 2 for k in r.path_rank[r.path_dur_ns > 100_000_000]}
    assert path_ranks == {found.ranks[0]}
    assert "stalled as long on their own step thread" in found.evidence
    assert a.cause(2) == found


@pytest.mark.parametrize("category", sorted(STALLED))
def test_each_ranks_step_thread_measures_its_own_stall(category: str) -> None:
    a, _ = synth_case(**TINY4, inject=f"{category}@2=150ms")
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps]
    excess = thread_excess(a.graph, a.points, complete, STALLED[category])
    assert {rank for (step, rank) in excess} == {0, 1, 2, 3}
    for (step, _), ns in excess.items():  # 150 ms more in the stalled step, nothing more in the others
        assert ns == pytest.approx(150e6, rel=0.02) if step == 2 else abs(ns) < 2e6, (step, ns)


def test_a_stall_of_one_rank_stays_on_that_rank() -> None:
    a, _ = synth_case(**TINY4, inject="dataloader_stall@2:1=150ms")
    (found,) = _of_step(a.findings, "dataloader_stall", 2)
    assert found.ranks == (1,) and "stalled as long" not in found.evidence


def test_a_rank_blocked_on_a_collective_without_an_op_around_the_wait_did_not_stall() -> None:
    """gpt_2rank (gloo): rank 1 pauses 150 ms in step 5; rank 0's thread has a 144 ms gap with no op open while
    it waits for rank 1's gradients. The gap ends when the all-reduce does: a wait, not a pause of its own."""
    a = analyze(read_trace(Path(__file__).parents[2] / "examples" / "gpt_2rank", workers=1))
    (pause,) = _of_step(a.findings, Bottleneck.HOST_PAUSE, 5)
    assert pause.ranks == (1,) and pause.cause
