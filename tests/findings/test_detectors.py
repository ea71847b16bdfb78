"""Host and step detectors on synthetic jobs: stragglers and pauses on the right rank and step."""

from __future__ import annotations

import pytest

from bottleneck_oracle.graph.types import Bottleneck, Category
from tests.analysis.synth_cases import synth_case


def test_straggler_on_gpu_job() -> None:
    a, manifest = synth_case("gpt2-small", dp=2, inject="straggler_rank@2:0=50ms")
    found = {(f.category, f.step, f.ranks) for f in a.findings}
    assert (Bottleneck.STRAGGLER_RANK, 2, (0,)) in found and (Bottleneck.HOST_PAUSE, 2, (0,)) in found
    straggler = next(f for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK)
    assert straggler.impact_ms == pytest.approx(manifest.ground_truth[0].injected_ms, rel=0.05)
    # the waiting rank's extra time is communication (its path runs on the late rank's idle time)
    r1 = next(r for r in a.steps if (r.step, r.rank) == (2, 1))
    assert r1.breakdown_ns[Category.COMMUNICATION] > 45e6


def test_pause_inside_a_user_range_is_a_host_pause() -> None:
    # the synthetic pause sits inside `## forward ##`: a long uncovered stretch there is a pause
    a, _ = synth_case("gpt2-small", dp=2, inject="host_pause@3:1=50ms")
    pause = next(f for f in a.findings if f.category == Bottleneck.HOST_PAUSE)
    assert (pause.step, pause.ranks) == (3, (1,)) and pause.impact_ms == pytest.approx(50, abs=0.25)
    # the 50 ms gap is capped by what the step took beyond its peers: 49.8 ms
    (slow,) = [s for s in a.slow_steps if (s.step, s.rank) == (3, 1)]
    assert pause.impact_ms == round(slow.excess_ns / 1e6, 3)


def test_pipeline_send_recv_is_never_a_straggler() -> None:
    a, _ = synth_case("gpt2-small", pp=2, dp=2, microbatches=4)
    assert not [f for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK]


def test_a_rank_late_only_by_what_it_waited_for_is_no_straggler() -> None:
    # rank 1 starts step 2 40 ms late; its tensor-parallel and pipeline peers wait for it and so reach
    # their own data-parallel all-reduces late: they pass the lateness on, they do not make it
    a, _ = synth_case("tiny", dp=2, tp=2, pp=2, microbatches=2, inject="straggler_rank@2:1=40ms")
    late = [f.ranks for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK and f.step == 2]
    assert late == [(1,)]
    (cause,) = [f for f in a.findings if f.cause and f.step == 2]
    assert cause.ranks == (1,) and cause.impact_ms == pytest.approx(40, abs=0.5)
    # it leads its step's findings: the others' waits come after it
    assert [f for f in a.findings if f.step == 2][0] is cause


@pytest.mark.parametrize("inject", ["slow_compute@2:1", "host_sync@2:1"])
def test_many_short_waits_for_a_slow_peer_are_passed_on(inject: str) -> None:
    # rank 1's kernels (or syncs) run long: its tensor-parallel peer rank 0 waits a little in each of
    # their all-reduces, and reaches its data-parallel all-reduce late by the sum of those waits
    a, _ = synth_case("gpt2-small", dp=2, tp=2, inject=inject)
    assert [f.ranks for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK and f.step == 2] == [(1,)]
    (cause,) = [f for f in a.findings if f.cause and f.step == 2]
    assert cause.ranks == (1,) and cause.category.value == inject.split("@")[0]
