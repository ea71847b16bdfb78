"""Tests for whatif/verify.py: a job run again with edits, measured by the same analysis."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import Edit, parse_edit
from bottleneck_oracle.whatif.predict import baseline_ms
from bottleneck_oracle.whatif.verify import rerun_step_ms, verify_plan
from tests.whatif.cases import fault, job


def test_a_rerun_without_edits_measures_the_recorded_step() -> None:
    folder, a = job()
    assert rerun_step_ms(folder, [], 2) == pytest.approx(baseline_ms(a, 2), abs=1e-3)  # same config, same bytes


def test_the_plan_is_rerun_cumulatively_and_what_cannot_be_made_is_said() -> None:
    folder, a = fault("slow_compute")  # a GPU-bound job: faster GEMMs shorten its step
    fixed = [Edit.fix("slow_compute", 2)]
    plan = [fixed, [*fixed, parse_edit("scale op=gemm x2")], [*fixed, parse_edit("scale op=gemm rank=1 x2")]]
    measured, note = verify_plan(folder, plan, 2)
    assert measured[0] is not None and measured[1] is not None and measured[1] < measured[0] < baseline_ms(a, 2)
    assert measured[2] is None and "selected by op= alone" in note


def test_a_fix_is_verified_through_the_category_it_also_explains() -> None:
    folder, _ = fault("host_pause")
    pause, straggler = Edit.fix("host_pause", 2), Edit.fix("straggler_rank", 2)
    (alone,), note = verify_plan(folder, [[straggler]], 2)
    assert alone is None and "no straggler_rank injection in step 2" in note
    (swapped,), note = verify_plan(folder, [[straggler]], 2, alternatives={straggler: (pause,)})
    assert swapped == pytest.approx(rerun_step_ms(folder, [pause], 2)) and note == ""


def test_a_folder_without_a_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no manifest.json; --verify re-runs a job made by oracle synth"):
        rerun_step_ms(tmp_path, [], 2)
