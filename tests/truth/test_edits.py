"""Tests for truth/edits.py: the edit language, its strings, its JSON and the whatif.json it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import (
    WHATIF_NAME,
    Edit,
    EditKind,
    Selector,
    edit_from_json,
    edit_to_json,
    edit_type,
    fixed_injections,
    format_edit,
    parse_edit,
    step_rows,
    write_whatif,
)
from bottleneck_oracle.truth.injection import Injection


@pytest.mark.parametrize("text,edit", [
    ("scale op=allreduce x2", Edit.scale(2.0, op="allreduce")),
    ("scale allreduce x2", Edit.scale(2.0, op="allreduce")),
    ("scale kind=kernel name=^sm90_.*gemm rank=0,1 stream=7 step=3 x1.5",
     Edit(EditKind.SCALE, Selector(kind="kernel", name="^sm90_.*gemm", ranks=(0, 1), streams=(7,), steps=(3,)), 1.5)),
    ("scale op=dataload x4", Edit.scale(4.0, op="dataloader")),
    ("remove name=^aten::copy_$ step=2", Edit(EditKind.REMOVE, Selector(name="^aten::copy_$", steps=(2,)))),
    ("set op=optimizer 5", Edit(EditKind.SET, Selector(op="optimizer"), ms=5.0)),
    ("set op=optimizer 2.5ms", Edit(EditKind.SET, Selector(op="optimizer"), ms=2.5)),
    ("fix straggler_rank", Edit.fix("straggler_rank")),
    ("fix host_pause step=5", Edit.fix("host_pause", 5)),
    ("overlap", Edit(EditKind.OVERLAP)),
    ("overlap comm with compute", Edit(EditKind.OVERLAP)),
    ("data_parallel=8", Edit.data_parallel(8)),
    ("data_parallel=8 global_batch", Edit.data_parallel(8, keep_global_batch=True)),
    ("microbatches=8", Edit.microbatches(8)),
    ("microbatches=8 same_microbatch", Edit.microbatches(8, keep_global_batch=False)),
    ("remove_injection", Edit.remove_injection(0)),
    ("  remove_injection=2 ", Edit.remove_injection(2)),
    # the older forms still read
    ("collective_faster:allreduce=3", Edit.scale(3.0, op="allreduce")),
    ("kernel_faster:gemm", Edit.scale(2.0, op="gemm")),
    ("kernel_faster:attention=1.5x", Edit.scale(1.5, op="attention")),
])
def test_parse_edit_and_read_it_back(text: str, edit: Edit) -> None:
    parsed = parse_edit(text)
    assert parsed == edit
    assert parse_edit(format_edit(parsed)) == parsed  # the string form reads back
    again = edit_from_json(json.loads(json.dumps(edit_to_json(parsed))))
    assert format_edit(again) == format_edit(parsed) and again.global_batch_kept == parsed.global_batch_kept


@pytest.mark.parametrize("text,message", [
    ("faster x2", "unknown kind 'faster'"),
    ("", "empty"),
    ("scale x2", "give a selector"),
    ("scale op=allreduce", "end with the speed-up"),
    ("scale op=allreduce x0", "must be positive"),
    ("scale op=allreduce x-2", "must be positive"),
    ("scale op=allreduce xabc", "'abc' is not a number"),
    ("scale op=alltoallv x2", "unknown op class"),
    ("scale colour=red x2", "unknown selector key 'colour'"),
    ("scale kind=tensor x2", "unknown node kind"),
    ("scale name=( x2", "not a regular expression"),
    ("scale rank=one x2", "'one' is not a whole number"),
    ("set op=optimizer", "end with the time in ms"),
    ("fix", "give a category"),
    ("fix slowness", "unknown category 'slowness'"),
    ("fix none", "'none' is not a bottleneck"),
    ("fix host_pause op=gemm", "fix takes only step= and rank="),
    ("overlap everything", "expected 'overlap'"),
    ("data_parallel", "give the number"),
    ("data_parallel=2.5", "'2.5' is not a whole number"),
    ("data_parallel=0", "whole number >= 1"),
    ("microbatches=4 bigger", "unexpected 'bigger'"),
    ("collective_faster:alltoallv=2", "unknown collective 'alltoallv'"),
    ("kernel_faster:conv", "unknown kernel class 'conv'"),
])
def test_parse_edit_rejects_with_one_line_naming_the_edit(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")) as e:
        parse_edit(text)
    assert "\n" not in str(e.value) and str(e.value).startswith("edit ")


def test_older_json_reads_as_the_same_edit() -> None:
    assert edit_from_json({"kind": "kernel_faster", "target": "gemm", "factor": 2.0}) == Edit.scale(2.0, op="gemm")
    assert edit_from_json({"kind": "remove_injection", "target": "", "factor": 2.0, "value": 1}).value == 1
    with pytest.raises(ConfigError, match="unknown kind 'faster'"):
        edit_from_json({"kind": "faster"})


def test_edit_type_names_what_the_model_recorded_scores_for() -> None:
    assert edit_type(parse_edit("scale op=gemm x2")) == "kernel_faster:gemm"
    assert edit_type(parse_edit("scale op=allreduce x3")) == "collective_faster:allreduce"
    assert edit_type(parse_edit("scale op=gemm rank=1 x2")) == "scale"  # not what the model was scored on
    assert edit_type(parse_edit("fix host_pause")) == "fix:host_pause"
    assert edit_type(parse_edit("microbatches=8")) == "microbatches"


def test_fix_removes_the_injections_of_its_category_and_steps() -> None:
    pause, stall = Injection("host_pause", 3), Injection("dataloader_stall", 5)
    assert fixed_injections((pause, stall), Edit.fix("host_pause")) == (stall,)
    assert fixed_injections((pause, stall), Edit.fix("dataloader_stall", 5)) == (pause,)
    with pytest.raises(ConfigError, match="no dataloader_stall injection in step 4 to fix"):
        fixed_injections((pause, stall), Edit.fix("dataloader_stall", 4))


def test_step_rows_keep_steps_of_either_side_with_null_where_missing(tmp_path: Path) -> None:
    rows = step_rows({(1, 0): 10.0, (2, 0): 11.0}, {(2, 0): 5.5, (2, 1): 6.0})
    assert rows == [[1, 0, 10.0, None], [2, 0, 11.0, 5.5], [2, 1, None, 6.0]]
    write_whatif(tmp_path, [{"edit": edit_to_json(Edit.data_parallel(4)), "step_ms": rows}])
    data = json.loads((tmp_path / WHATIF_NAME).read_text())
    assert data["edits"][0]["edit"]["value"] == 4 and data["edits"][0]["step_ms"][0][3] is None


def test_pipeline_edits_read_back_and_refuse_what_they_cannot_mean() -> None:
    from bottleneck_oracle.truth.edits import EditKind, edit_from_json, edit_to_json, format_edit, parse_edit

    move = parse_edit("move_layer  3->0 layers=8")
    assert (move.kind, move.stages, move.value) == (EditKind.MOVE_LAYER, (3, 0), 8)
    even = parse_edit("even_microbatches")
    for edit in (move, even):
        assert parse_edit(format_edit(edit)) == edit == edit_from_json(edit_to_json(edit))
    assert edit_to_json(move)["stages"] == [3, 0]
    for bad in ("move_layer 3->3 layers=8", "move_layer 3->0 layers=1", "move_layer 3 0", "even_microbatches x2"):
        with pytest.raises(ConfigError):
            parse_edit(bad)
