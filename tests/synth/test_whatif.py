"""Tests for synth/whatif.py: edits applied to the simulated job, and their consistency."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.schedule import simulate
from bottleneck_oracle.synth.whatif import apply_edit, whatif
from bottleneck_oracle.truth.edits import Edit, EditKind
from bottleneck_oracle.truth.injection import parse_injection

JOB = SynthConfig(model="1b", dp=4, tp=2, microbatches=2, steps=3)
PIPELINE = SynthConfig(model="gpt2-small", dp=2, pp=2, microbatches=4, steps=3)


@pytest.mark.parametrize("text", ["host_pause@2:1=30", "straggler_rank@2:3=30", "slow_compute@2:0=3x",
                                  "dataloader_stall@3:2=20"])
def test_removing_an_injection_gives_back_the_clean_job(text: str) -> None:
    config = JOB.with_changes(injections=(parse_injection("host_sync@3:5=2"), parse_injection(text)))
    result = whatif(config, Edit.remove_injection(1))
    fixed = whatif(config, Edit.fix(text.split("@")[0]))  # fixing the category removes the same fault
    assert np.allclose(fixed.edited.step_ms, result.edited.step_ms)
    clean = simulate(JOB.with_changes(injections=(parse_injection("host_sync@3:5=2"),)))
    assert np.allclose(result.edited.step_ms, clean.step_ms, atol=1e-6)  # same noise draws: exactly clean
    assert result.baseline.step_ms[:, 1].min() > result.edited.step_ms[:, 1].max() - 1.0


@pytest.mark.parametrize("config", [JOB, PIPELINE], ids=["dp-tp", "dp-pp"])
def test_a_faster_all_reduce_never_slows_a_step(config: SynthConfig) -> None:
    result = whatif(config, Edit.scale(2.0, op="allreduce"))
    before, after = result.baseline_ms(), result.edited_ms()
    assert set(before) == set(after)
    assert all(after[k] <= before[k] + 1e-3 for k in before)
    assert result.speedup() > 1.0


def test_faster_gemms_help_and_faster_sends_help_a_pipeline() -> None:
    assert whatif(JOB, Edit.scale(2.0, op="gemm")).speedup() > 1.3
    assert whatif(JOB, Edit.scale(1.0, op="optimizer")).speedup() == pytest.approx(1.0)
    assert whatif(PIPELINE, Edit.scale(4.0, op="sendrecv")).speedup() >= 1.0


def test_more_microbatches_shrink_the_bubble_share() -> None:
    result = whatif(PIPELINE, Edit.microbatches(8))  # 8 micro-batches of 4 samples: same global batch
    assert result.edited.config.microbatches == 8 and result.edited.config.batch == 4
    assert result.speedup() > 1.0
    doubled = whatif(PIPELINE, Edit.microbatches(8, keep_global_batch=False))
    assert 1.4 < 1 / doubled.speedup() < 2.0  # twice the work, a smaller bubble share


def test_a_data_parallel_change_keeps_a_fault_on_its_stage_and_replica() -> None:
    job = PIPELINE.with_changes(injections=(parse_injection("dataloader_stall@2:3=20"),))  # stage 1, replica 1
    wider, _ = apply_edit(job, Edit.data_parallel(4))
    assert wider.injections[0].ranks == (5,)  # stage 1 of 4 replicas starts at rank 4
    narrower, _ = apply_edit(wider, Edit.data_parallel(1))
    assert narrower.injections[0].ranks == (1,)


def test_data_parallel_change_reshapes_the_job() -> None:
    result = whatif(JOB, Edit.data_parallel(2))
    assert result.edited.step_ms.shape == (4, 3) and result.baseline.step_ms.shape == (8, 3)
    assert result.speedup() >= 1.0  # a smaller gradient all-reduce


@pytest.mark.parametrize(("edit", "message"), [
    (Edit.remove_injection(0), "no injection 0"),
    (Edit.data_parallel(4096), "ranks; 1 to 4096"),
    (Edit.microbatches(3), "does not split into 3 micro-batches"),
    (Edit.fix("host_pause"), "no host_pause injection to fix"),
    (Edit.scale(2.0, op="gemm", ranks=(1,)), "selected by op= alone"),
    (Edit.scale(2.0, op="norm"), "the simulator scales one kernel class"),
    (Edit(EditKind.OVERLAP), "the simulator cannot make it"),
    (Edit.data_parallel(2, keep_global_batch=True), "keeps the per-rank batch"),
])
def test_edits_that_do_not_fit_the_job_are_refused(edit: Edit, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        apply_edit(SynthConfig(model="1b", tp=2, micro_batch=4), edit)
    assert message in str(caught.value)
