"""Tests for whatif/optimize.py: the matching remedy ranked first for one injected fault of every
category, and the plan's first gain checked against the job simulated again."""

from __future__ import annotations

import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.findings.gpu_bound import gpu_bound_steps
from bottleneck_oracle.graphdb.playbook import read_playbook
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import EditKind, format_edit
from bottleneck_oracle.whatif.optimize import MIN_GAIN, candidates, optimize
from bottleneck_oracle.whatif.verify import verify_plan
from tests.conftest import WILD
from tests.whatif.cases import FAULTS, fault, job

PLAYBOOK = read_playbook()


@pytest.mark.parametrize("category", sorted(FAULTS))
def test_the_matching_remedy_ranks_first(category: str) -> None:
    _, a = fault(category)
    plan = optimize(a, 2, PLAYBOOK, budget=2)
    best = plan.candidates[0]
    assert category in (best.category, *best.also), [(c.category, c.gain_ms) for c in plan.candidates]
    assert best.edit.kind == EditKind.FIX and best.gain_ms > 0.2 * plan.baseline_ms
    assert plan.plan[0].edit == best.edit and plan.plan[0].prediction.edits == (best.edit,)
    gains = [c.gain_ms for c in plan.candidates if c.prediction]
    assert gains == sorted(gains, reverse=True)
    body = plan.to_json()
    assert set(body["candidates"][0]) >= {"edit", "category", "predicted_ms", "gain_ms", "predictor", "confidence",
                                          "explanation"}
    assert body["plan"][0]["gain_ms"] == pytest.approx(best.gain_ms, abs=1e-3)


@pytest.mark.parametrize("category", ["host_pause", "straggler_rank", "checkpoint_stall", "pipeline_bubble",
                                      "slow_compute"])
def test_the_first_gain_of_the_plan_is_what_the_job_run_again_gains(category: str) -> None:
    folder, a = fault(category)
    plan = optimize(a, 2, PLAYBOOK, budget=1)
    (measured,), note = verify_plan(folder, plan.cumulative_edits(), 2, alternatives=plan.alternatives())
    assert note == "" and measured is not None
    predicted_gain = plan.baseline_ms - plan.plan[0].prediction.best_ms
    measured_gain = plan.baseline_ms - measured
    assert abs(predicted_gain - measured_gain) <= 0.10 * measured_gain  # the bar; measured: < 1%


def test_a_clean_job_gets_only_its_chronic_remedies_and_small_gains() -> None:
    _, a = job()  # a tiny model: host-bound in every step, and nothing injected
    assert a.findings and all(f.step is None for f in a.findings)
    plan = optimize(a, 2, PLAYBOOK)
    assert all("step=" not in str(c.edit) for c in plan.candidates)  # no step anomaly to fix
    assert all(c.gain_ms < 0.05 * plan.baseline_ms for c in plan.candidates)
    assert all(c.prediction.gain_ms >= MIN_GAIN * plan.baseline_ms for c in plan.plan)


def test_playbook_remedies_become_candidates_with_their_titles() -> None:
    _, a = fault("pipeline_bubble")
    found = candidates(a, 2, PLAYBOOK)
    texts = {str(c.edit): c for c in found}
    assert "fix pipeline_bubble step=2" in texts
    assert any(t.startswith("microbatches=8") for t in texts)  # "more micro-batches": twice the trace's 4
    assert "More microbatches per pipeline step" in next(c for t, c in texts.items() if t.startswith("micro")).remedies


def test_a_budget_below_one_is_refused() -> None:
    _, a = fault("host_pause")
    with pytest.raises(ConfigError, match="the budget must be at least 1"):
        optimize(a, 2, PLAYBOOK, budget=0)


def test_the_plan_goes_on_with_what_the_first_change_exposes() -> None:
    _, a = fault("pipeline_bubble")  # a tiny pipeline: once the bubble is gone it is host-bound
    plan = optimize(a, 2, PLAYBOOK, budget=3)
    first = plan.plan[0]
    assert first.category == "pipeline_bubble" and first.prediction.edits == (first.edit,)
    assert len(plan.plan) == 3 and {c.category for c in plan.plan[1:]} <= {"launch_overhead", "dataloader_stall"}
    for before, after in zip(plan.plan, plan.plan[1:]):  # every next change is on top of the ones before
        assert after.prediction.edits[:-1] == before.prediction.edits
        assert after.prediction.best_ms < before.prediction.best_ms
    assert len({str(c.edit) for c in plan.plan}) == len(plan.plan)


def test_the_retimed_trace_of_a_host_bound_fix_is_analysed_again(real_traces) -> None:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.analysis.analysis import analyze
    from bottleneck_oracle.replay.retime import edited_analysis
    from bottleneck_oracle.traces import read_trace

    a = analyze(read_trace(real_traces / "hta" / "amd_mi250"))  # host-bound
    plan = optimize(a, 1, PLAYBOOK, budget=2)
    assert plan.plan[0].category == "launch_overhead" and plan.plan[0].prediction.best_ms < plan.baseline_ms
    # its retimed threads end ranges at one instant, each seeming to release the other: those ties are
    # no hand-off (graph/handoffs.py), so the retimed job has no cycle and is analysed again
    fixed = edited_analysis(a, 1, [plan.plan[0].edit])
    assert max(r.wall_ns for r in fixed.steps if r.step == 1) / 1e6 < plan.baseline_ms


def _h100(name: str) -> Analysis:
    return analyze(read_trace([WILD / "tracelens" / "h100" / name / "trace.json.gz"]))


def test_a_gpu_bound_step_gets_the_kernel_side_remedies_with_their_gains() -> None:
    a = _h100("qwen1.5_0.5b_chat")  # one H100 step, its GPU busy most of it
    (bound,) = gpu_bound_steps(a.graph, a.gpu, [(6, 0)])
    kernel_side = {e.edit: e.title for e in PLAYBOOK if e.category == "slow_compute" and e.edit.startswith("scale ")}
    assert {"torch.compile a GPU-bound model", "Larger batch per optimizer step"} <= set(kernel_side.values())
    found = candidates(a, 6, PLAYBOOK)
    assert {format_edit(c.edit) for c in found} == set(kernel_side)
    assert all(c.category == "slow_compute" and c.evidence == bound.evidence and c.kernel_side for c in found)
    plan = optimize(a, 6, PLAYBOOK, budget=1)
    gemm = next(c for c in plan.candidates if format_edit(c.edit) == "scale op=gemm x1.3")
    gemm_ms = dict(bound.op_classes)["gemm"]
    assert 0 < gemm.gain_ms <= gemm_ms * (1 - 1 / 1.3) + 1e-3  # at most the GEMM time it saves
    assert plan.plan and plan.plan[0].edit.kind == EditKind.SCALE


def test_a_host_bound_gpu_step_keeps_its_host_side_fixes() -> None:
    a = _h100("bert_small")  # its GPU idle most of the step: launch-bound
    assert not gpu_bound_steps(a.graph, a.gpu, [(6, 0)])
    found = candidates(a, 6, PLAYBOOK)
    assert "fix launch_overhead" in {format_edit(c.edit) for c in found}
    assert not any(c.category == "slow_compute" or c.kernel_side for c in found)
