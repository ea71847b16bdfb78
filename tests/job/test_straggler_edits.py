"""Edits of the edit language replayed on pipeline jobs: a healthy worker, no stragglers, a moved layer,
even micro-batches, scaled op types; and the edits that cannot apply, refused in one line."""

from __future__ import annotations

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graph.pipeline import build_job_graph
from bottleneck_oracle.job.straggler_edits import pipeline_whatif
from bottleneck_oracle.job.stragglers import analyze_stragglers
from bottleneck_oracle.traces.op_table import read_op_table
from bottleneck_oracle.truth.edits import parse_edit
from tests.conftest import STRAGGLERS


@pytest.fixture(scope="module")
def jobs():  # type: ignore[no-untyped-def]
    return {job: analyze_stragglers(build_job_graph(read_op_table(STRAGGLERS / job))) for job in ("AR", "ST")}


def _whatif(a, *texts: str):  # type: ignore[no-untyped-def]
    return pipeline_whatif(a, [parse_edit(t) for t in texts])


def test_the_slow_worker_healthy_saves_what_its_share_says_and_a_healthy_one_saves_nothing(jobs) -> None:  # type: ignore[no-untyped-def]
    a = jobs["AR"]
    healed = _whatif(a, "fix straggler_rank rank=0")
    assert healed.after.mean_ns == a.healthy_workers.mean_ns
    assert healed.saving_ns > 0.45 * a.no_gaps.mean_ns  # the job ran at about half speed
    lo, hi = healed.interval_ns
    assert lo <= healed.after.mean_ns <= hi
    other = _whatif(a, "fix straggler_rank rank=16")
    assert abs(other.saving_ns) < 0.01 * a.no_gaps.mean_ns


def test_a_rank_the_table_does_not_record_stands_for_its_groups_recorded_rank(jobs) -> None:  # type: ignore[no-untyped-def]
    a = jobs["AR"]  # tensor-parallel groups of 4: the study records ranks 0, 4, 8, ...
    three, zero = _whatif(a, "fix straggler_rank rank=3"), _whatif(a, "fix straggler_rank rank=0")
    assert three.after.mean_ns == zero.after.mean_ns and "rank 3 as its group's recorded rank 0" in three.assumptions[0]
    with pytest.raises(ConfigError, match="rank 64 records no ops"):
        _whatif(a, "fix straggler_rank rank=64")


def test_a_healthy_worker_needs_replicas_to_be_measured_by() -> None:
    from tests.conftest import DATA

    a = analyze_stragglers(build_job_graph(read_op_table(DATA / "pipeline" / "unbalanced_2rank")))
    with pytest.raises(ConfigError, match="each stage has one replica"):
        _whatif(a, "fix straggler_rank rank=1")
    assert _whatif(a, "fix straggler_rank").after.mean_ns == a.ideal.mean_ns  # no stragglers: still the ideal


def test_no_stragglers_at_all_is_the_ideal(jobs) -> None:  # type: ignore[no-untyped-def]
    a = jobs["ST"]
    assert _whatif(a, "fix straggler_rank").after.mean_ns == a.ideal.mean_ns


def test_moving_a_layer_off_the_long_stage_helps_and_onto_it_hurts(jobs) -> None:  # type: ignore[no-untyped-def]
    a = jobs["ST"]
    off = _whatif(a, "move_layer 3->0 layers=8")
    onto = _whatif(a, "move_layer 0->3 layers=8")
    assert off.saving_ns > 0 > onto.saving_ns
    assert "1/8 of stage 3's computes and 1/8 of stage 0's" in off.assumptions[0]
    uneven = _whatif(a, "move_layer 3->0 layers=8,4")  # stage 0 holds 4: a layer more costs it a quarter more
    assert uneven.after.mean_ns > off.after.mean_ns


def test_edits_replay_together_and_a_scale_only_touches_what_it_selects(jobs) -> None:  # type: ignore[no-untyped-def]
    a = jobs["ST"]
    faster = _whatif(a, "scale name=^backward-compute$ x2")
    both = _whatif(a, "scale name=^backward-compute$ x2", "scale name=^forward-compute$ x2")
    assert 0 < faster.saving_ns < both.saving_ns
    one_step = _whatif(a, f"scale step={int(a.graph.steps[0])} x2")
    assert one_step.after.step_ns[0] < a.no_gaps.step_ns[0]
    assert (one_step.after.step_ns[1:] == a.no_gaps.step_ns[1:]).all()


@pytest.mark.parametrize(("edit", "message"), [
    ("scale op=gemm x2", "selects by rank=, step= and name="),
    ("fix straggler_rank rank=99", "rank 99 records no ops; the table's workers are ranks 0, 1, 2"),
    ("scale step=1 x2", "step 1 is not among the analysed steps"),
    ("scale name=^zz x2", "matches no op type"),
    ("move_layer 3->9 layers=8", "the job has stages 0..3"),
    ("fix host_pause", "only 'fix straggler_rank' applies"),
    ("microbatches=4", "not an edit of a pipeline job's op times"),
])
def test_edits_that_cannot_apply_are_refused_by_name(jobs, edit: str, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=message):
        _whatif(jobs["ST"], edit)
