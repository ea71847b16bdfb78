"""Tests for whatif/predict.py: each predictor's answer, the choice and its reason, and what moved
on the critical path, on the real two-rank capture and synthetic jobs."""

from __future__ import annotations

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.gnn.predict import Predictor
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.whatif.predict import _at_least_gpu_busy, baseline_ms, check_step, predict_whatif
from tests.conftest import REPO, WILD
from tests.whatif.cases import GPT2, job


@pytest.fixture(scope="module")
def gpt():  # type: ignore[no-untyped-def]
    return analyze(read_trace(REPO / "examples" / "gpt_2rank"))


@pytest.fixture(scope="module")
def model() -> Predictor:
    return Predictor()


def test_fixing_the_straggler_takes_its_lateness_off_the_step(gpt) -> None:  # type: ignore[no-untyped-def]
    straggler = next(f for f in gpt.findings if f.category == "straggler_rank")
    p = predict_whatif(gpt, straggler.step, [parse_edit("fix straggler_rank")])
    assert p.baseline_ms == baseline_ms(gpt, straggler.step)
    assert p.predicted_ms["replay"] == pytest.approx(p.baseline_ms - straggler.impact_ms, abs=0.5)
    moved = p.moved()
    assert moved["breakdown_delta_ms"]["idle"] == pytest.approx(-straggler.impact_ms, abs=0.5)
    assert p.chosen == "replay" and "not loaded" in p.why
    body = p.to_json()
    assert set(body) == {"step", "baseline_ms", "edits", "predicted_ms", "chosen", "why", "assumptions",
                         "critical_path", "new_critical_path", "moved", "interval_ms", "interval_from",
                         "model_familiarity"}
    assert body["model_familiarity"] is None  # the model was not asked
    assert body["edits"][0]["text"] == "fix straggler_rank"
    assert sum(body["new_critical_path"]["breakdown_ms"].values()) == pytest.approx(p.best_ms, abs=0.01)


def test_the_choice_follows_the_checkpoints_recorded_scores(model: Predictor) -> None:
    _, a = job("", GPT2)  # a synthetic job like those the model was trained and scored on
    scores = model.checkpoint.metrics["splits"]["test"]["whatif"]["kernel_faster:gemm"]
    step = sorted({r.step for r in a.steps})[1]
    p = predict_whatif(a, step, [parse_edit("scale op=gemm x2")], model)
    assert p.familiar is not None and p.familiar.known
    best = min((k for k in ("replay", "gnn_replay", "gnn") if k in scores), key=scores.get)
    assert p.chosen == best and f"{best} {scores[best]:.2f}%" in p.why
    assert set(p.predicted_ms) == {"replay", "gnn_replay", "gnn"}
    assert p.best_ms < p.baseline_ms


def test_on_a_step_unlike_its_training_steps_the_model_abstains(gpt, model: Predictor) -> None:  # type: ignore[no-untyped-def]
    # a real CPU capture: its scores were measured on simulated GPU jobs, so they say nothing here
    p = predict_whatif(gpt, 3, [parse_edit("scale op=gemm x2")], model)
    assert not p.familiar.known and p.familiar.distance > p.familiar.threshold
    assert set(p.predicted_ms) == {"replay"} and p.chosen == "replay"
    assert p.why.startswith("the graph model abstains: this step lies") and f"{p.familiar.threshold:.1f}" in p.why
    assert p.to_json()["model_familiarity"] == {"distance": round(p.familiar.distance, 2),
                                                "threshold": round(p.familiar.threshold, 2), "known": False}
    moved = p.moved()
    assert p.best_ms < p.baseline_ms
    assert moved["changed"][0]["delta_ms"] < 0 and "aten::mm" in {c["op"] for c in moved["changed"]}


def test_an_edit_the_model_never_saw_is_left_to_the_replay_and_says_so(model: Predictor) -> None:
    _, a = job("host_pause@2:1", GPT2)
    p = predict_whatif(a, 2, [parse_edit("fix host_pause")], model)
    assert p.familiar.known
    assert p.chosen == "replay" and "no recorded score for fix:host_pause" in p.why
    assert "gnn" not in p.predicted_ms  # it cannot see a gap made shorter


def test_several_edits_compose(gpt) -> None:  # type: ignore[no-untyped-def]
    one = predict_whatif(gpt, 5, [parse_edit("fix straggler_rank")]).best_ms
    both = predict_whatif(gpt, 5, [parse_edit("fix straggler_rank"), parse_edit("scale op=gemm x2")]).best_ms
    assert both < one


def test_bad_questions_are_refused_with_what_is_wrong(gpt) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=r"step 99: no such complete step in the trace; its steps are 2, 3"):
        check_step(gpt, 99)
    assert check_step(gpt, None) == gpt.slow_steps[0].step
    with pytest.raises(ConfigError, match="give at least one edit"):
        predict_whatif(gpt, 5, [])
    with pytest.raises(ConfigError, match="no pipeline stages"):
        predict_whatif(gpt, 5, [parse_edit("microbatches=4")])
    with pytest.raises(ConfigError, match="not predicted yet"):
        predict_whatif(gpt, 5, [parse_edit("overlap")])
    with pytest.raises(ConfigError, match="on a trace use fix CATEGORY"):
        predict_whatif(gpt, 5, [parse_edit("remove_injection=0")])


def test_a_faster_all_reduce_helps_a_data_parallel_job(model: Predictor) -> None:
    _, a = job("", GPT2)
    p = predict_whatif(a, 2, [parse_edit("scale op=allreduce x2")], model)
    assert p.best_ms <= p.baseline_ms and p.chosen in p.predicted_ms
    assert p.after is not None and p.after.breakdown_ms["communication"] <= p.before.breakdown_ms["communication"]


def test_a_host_side_fix_is_never_predicted_below_the_gpus_busy_time(gpt, model: Predictor) -> None:  # type: ignore[no-untyped-def]
    a = analyze(read_trace([WILD / "tracelens" / "h100" / "bert_small" / "trace.json.gz"]))
    busy = round(analysis_to_dict(a, 6)["steps"][0]["gpu"]["busy_ms"], 3)  # what `oracle analyze` reports
    fix, faster = parse_edit("fix launch_overhead"), parse_edit("scale op=gemm x2")
    floored, notes = _at_least_gpu_busy(a, 6, (fix,), {"replay": busy / 2, "gnn": busy + 1}, ())
    assert floored == {"replay": busy, "gnn": busy + 1} and "GPU was busy" in notes[0]
    assert _at_least_gpu_busy(a, 6, (faster,), {"replay": busy / 2}, ()) == ({"replay": busy / 2}, ())
    assert _at_least_gpu_busy(gpt, 5, (parse_edit("fix host_pause"),), {"replay": 0.5}, ()) == ({"replay": 0.5}, ())
    p = predict_whatif(a, 6, [fix], model)
    assert p.gain_ms > 0 and min(p.predicted_ms.values()) >= busy


def test_a_slower_all_reduce_is_replayed_never_given_to_the_model_and_predicts_no_gain(model: Predictor) -> None:
    """A slow-down (a slower network) is outside what the graph model learned: before, its features read
    log1p of a negative saving and it answered NaN. Replay alone answers, every number finite, no faster
    than recorded, and the all-reduce twice slower costs at least what it cost when it was twice faster."""
    _, a = job("", GPT2)
    slower = predict_whatif(a, 2, [parse_edit("scale op=allreduce x0.5")], model)
    faster = predict_whatif(a, 2, [parse_edit("scale op=allreduce x2")], model)
    assert set(slower.predicted_ms) == {"replay"} and slower.chosen == "replay" and "slow-down" in slower.why
    assert all(v == v for v in slower.predicted_ms.values())  # no NaN
    assert slower.best_ms >= slower.baseline_ms
    assert slower.best_ms - slower.baseline_ms >= faster.baseline_ms - faster.best_ms - 1e-3
    assert set(faster.predicted_ms) == {"replay", "gnn_replay", "gnn"}  # speed-ups still reach the model
