"""GPU-rank detectors on synthetic jobs whose truth is known: bubbles, host syncs, host-bound ranks."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.findings.gpu_detectors import gpu_busy_ns
from bottleneck_oracle.graph.path_nodes import p2p_nodes
from bottleneck_oracle.graph.types import Bottleneck, Category, NodeKind
from tests.analysis.synth_cases import synth_case


def _found(a) -> set[tuple[str, int | None, tuple[int, ...]]]:  # type: ignore[no-untyped-def]
    return {(f.category.value, f.step, f.ranks) for f in a.findings}


@pytest.mark.parametrize("model,dp,tp,pp,mb", [("gpt2-small", 2, 1, 1, 1), ("gpt2-small", 2, 1, 2, 4),
                                                ("gpt2-small", 1, 2, 1, 1)])
def test_healthy_gpu_jobs_have_no_finding(model: str, dp: int, tp: int, pp: int, mb: int) -> None:
    a, manifest = synth_case(model, dp=dp, tp=tp, pp=pp, microbatches=mb)
    assert a.findings == () and a.slow_steps == ()
    for r in a.steps:  # wall times are the simulation's truth
        assert r.wall_ns / 1e6 == pytest.approx(manifest.step_ms[r.rank][r.step], abs=0.01)


def test_tensor_parallel_job_is_compute_bound_not_communication_bound() -> None:
    a, _ = synth_case("gpt2-small", tp=2)
    # the path hops to whichever rank reaches each tensor-parallel all-reduce last, but that rank's
    # kernels stay compute: only the all-reduces themselves (about 15%, blocking by design) are communication
    for r in a.steps:
        assert r.breakdown_ns[Category.GPU_COMPUTE] > 0.7 * r.wall_ns
        assert r.breakdown_ns[Category.COMMUNICATION] < 0.2 * r.wall_ns


def test_delayed_pipeline_send_is_a_bubble_on_both_stages() -> None:
    a, manifest = synth_case("tiny", pp=2, microbatches=4, inject="pipeline_bubble@3=20ms")
    (truth,) = manifest.ground_truth
    bubbles = [f for f in a.findings if f.category == Bottleneck.PIPELINE_BUBBLE]
    assert sorted((f.step, f.ranks) for f in bubbles) == [(3, (0,)), (3, (1,))]
    for f in bubbles:
        assert f.impact_ms == pytest.approx(truth.injected_ms, rel=0.1)
    assert not [f for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK]


def test_many_item_syncs_are_host_sync() -> None:
    a, _ = synth_case("gpt2-small", dp=2, inject="host_sync@3=20ms")
    syncs = {(f.step, f.ranks) for f in a.findings if f.category == Bottleneck.HOST_SYNC}
    assert syncs == {(3, (0,)), (3, (1,))}
    top = max(a.findings, key=lambda f: f.impact_ms)
    assert top.category == Bottleneck.HOST_SYNC and "blocking syncs" in top.evidence


def test_p2p_nodes_are_two_member_sendrecv_only() -> None:
    a, _ = synth_case("tiny", pp=2, microbatches=4)
    g = a.graph
    p2p = p2p_nodes(g)
    assert p2p.sum() > 0 and (g.kind[p2p] == NodeKind.COMM).all()
    members = g.collectives.members[g.collective[p2p]]
    assert (members == 2).all()
    dp_job, _ = synth_case("gpt2-small", dp=2)
    assert not p2p_nodes(dp_job.graph).any()


def test_gpu_busy_counts_compute_not_waiting_communication() -> None:
    a, _ = synth_case("gpt2-small", dp=2)
    g = a.graph
    busy = gpu_busy_ns(g)
    walls = g.steps.end_ns - g.steps.start_ns
    assert ((busy > 0.8 * walls) & (busy <= walls)).all()  # a healthy GPU-bound step


def test_gpu_busy_of_a_bubbled_stage_drops_by_the_bubble() -> None:
    a, manifest = synth_case("tiny", pp=2, microbatches=4, inject="pipeline_bubble@3=20ms")
    g = a.graph
    idle = (g.steps.end_ns - g.steps.start_ns) - gpu_busy_ns(g)
    row = int(np.flatnonzero((g.steps.step == 3) & (g.steps.rank == 1))[0])
    others = np.flatnonzero((g.steps.step != 3) & (g.steps.rank == 1))
    assert (idle[row] - np.median(idle[others])) / 1e6 == pytest.approx(manifest.ground_truth[0].injected_ms, rel=0.1)
