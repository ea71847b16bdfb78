"""Tests for capture/whatif.py: edits of a capture job, and a real re-capture without its stall."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
from bottleneck_oracle.capture.whatif import CaptureWhatIf, apply_capture_edit, capture_whatif
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import WHATIF_NAME, Edit
from bottleneck_oracle.vocabulary import Bottleneck
from tests.capture.profiler_json import longest_gap_ms, read_json
from tests.captured_noise import retaken

TINY = {"layers": 2, "d_model": 64, "heads": 4, "seq_len": 32, "batch_size": 8, "vocab": 256, "timeout_s": 120}
STALLED = CaptureConfig(ranks=2, steps=5, injections=(parse_injection("host_pause@3:0=40ms"),
                                                      parse_injection("straggler_rank@4:1=150ms")), **TINY)
PIPELINE = CaptureConfig(ranks=2, steps=3, pipeline=2, microbatches=2, **TINY)


def test_remove_injection_drops_only_that_one() -> None:
    edited = apply_capture_edit(STALLED, Edit.remove_injection(1))
    assert edited.injections == STALLED.injections[:1]
    assert (edited.ranks, edited.steps, edited.batch_size) == (STALLED.ranks, STALLED.steps, STALLED.batch_size)


def test_data_parallel_sets_ranks_to_stages_times_replicas() -> None:
    assert apply_capture_edit(PIPELINE, Edit.data_parallel(2)).ranks == 4
    assert apply_capture_edit(STALLED, Edit.data_parallel(3)).ranks == 3


def test_microbatches_keep_the_batch_or_each_microbatch() -> None:
    same = apply_capture_edit(PIPELINE, Edit.microbatches(4))
    assert (same.microbatches, same.batch_size) == (4, 8)
    grown = apply_capture_edit(PIPELINE, Edit.microbatches(4, keep_global_batch=False))
    assert (grown.microbatches, grown.batch_size) == (4, 16)


def test_fix_drops_the_injections_of_its_category() -> None:
    assert apply_capture_edit(STALLED, Edit.fix("straggler_rank")).injections == STALLED.injections[:1]


@pytest.mark.parametrize("config,edit,message", [
    (STALLED, Edit.scale(2.0, op="allreduce"), "a real capture cannot make scale op=allreduce x2"),
    (STALLED, Edit.scale(2.0, op="gemm"), "cannot make scale op=gemm x2"),
    (STALLED, Edit.fix("checkpoint_stall"), "no checkpoint_stall injection to fix"),
    (STALLED, Edit.remove_injection(2), "no injection 2; the job has 2"),
    (STALLED, Edit.microbatches(4), "micro-batches need a pipeline capture"),
    (STALLED, Edit.data_parallel(1), "the edited job is invalid: injection straggler_rank@4:1=150ms: rank 1"),
    (PIPELINE, Edit.microbatches(16), "the edited job is invalid: .*microbatches \\(16\\) must divide"),
])
def test_edits_a_capture_cannot_make_are_refused(config: CaptureConfig, edit: Edit, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_capture_edit(config, edit)


def test_a_bad_edit_is_refused_before_anything_is_captured(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        capture_whatif(tmp_path / "out", STALLED, [Edit.remove_injection(0), Edit.scale(2.0, op="gemm")])
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def recaptured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CaptureWhatIf]:
    """The stalled job captured, then again without its straggler."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("recaptured")
    (result,) = capture_whatif(out, STALLED, [Edit.remove_injection(1)])
    return out, result


@pytest.mark.slow
def test_recapture_runs_the_edited_job_and_records_both(recaptured: tuple[Path, CaptureWhatIf]) -> None:
    out, result = recaptured
    assert result.edited.config == apply_capture_edit(STALLED, Edit.remove_injection(1))
    before, after = result.baseline.step_wall_ms, result.edited.step_wall_ms
    rows = json.loads((out / WHATIF_NAME).read_text())["edits"][0]
    assert rows["edit"]["kind"] == "remove_injection" and rows["traces"] == "whatif/0-remove_injection"
    assert {(s, r): (b, a) for s, r, b, a in rows["step_ms"]} == {
        (s, r): (before[r][s], after[r][s]) for r in before for s in before[r]}
    # the edited traces read like any others, with the same ranks and steps
    edited = read_trace(out / result.folder)
    assert [info.rank for info in edited.ranks] == [0, 1]
    # the faults are where they were put: the straggler's sleep is a gap of at least its length on rank 1
    # in the baseline's step 4, and the pause that was kept one on rank 0 in both runs' step 3 (a loaded
    # machine can only lengthen a sleep)
    base = [read_json(out / name) for name in result.baseline.traces]
    again = [read_json(out / result.folder / name) for name in result.edited.traces]
    assert longest_gap_ms(base[1], 4) >= 0.99 * 150
    assert min(longest_gap_ms(base[0], 3), longest_gap_ms(again[0], 3)) >= 0.99 * 40


@pytest.mark.live
def test_live_recapture_without_the_straggler_gives_back_a_clean_step(tmp_path: Path) -> None:
    def gone(result: CaptureWhatIf) -> None:
        before, after = result.baseline.step_wall_ms, result.edited.step_wall_ms
        clean = statistics.median(ms for rank in before.values() for step, ms in rank.items() if step not in (3, 4))
        # the baseline's step 4 waited for the 150 ms straggler; the re-capture's does not
        assert min(before[r][4] for r in before) >= clean + 120
        assert max(after[r][4] for r in after) - clean < 0.2 * 150  # gone, within a shared machine's noise
        assert min(after[r][3] for r in after) >= clean + 30  # the pause that was kept is still there
        assert result.speedup() > 1.2

    # a take where the shared machine stalled in step 3 or 4 is taken again (tests/captured_noise.py)
    takes: list[Path] = []

    def take(i: int) -> CaptureWhatIf:
        takes.append(tmp_path / str(i))
        return capture_whatif(takes[-1], STALLED, [Edit.remove_injection(1)])[0]

    result = retaken(take, gone)
    # the edited traces read like any others: the straggler is gone, the pause is not
    edited = analyze(read_trace(takes[-1] / result.folder))
    found = {(f.category, f.step) for f in edited.findings}
    assert (Bottleneck.STRAGGLER_RANK, 4) not in found
    assert (Bottleneck.HOST_PAUSE, 3) in found
