"""Tests for truth/edits.py: the edit language, its records, its strings and its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import (
    WHATIF_NAME,
    Edit,
    EditKind,
    edit_to_json,
    parse_edit,
    step_rows,
    write_whatif,
)


def test_edit_records_validate_themselves() -> None:
    with pytest.raises(ConfigError, match="unknown collective 'broadcast'"):
        Edit.collective_faster("broadcast")
    with pytest.raises(ConfigError, match="unknown kernel class 'conv'"):
        Edit.kernel_faster("conv")
    with pytest.raises(ConfigError, match="integer >= 2"):
        Edit(EditKind.MICROBATCHES, factor=1.5)
    assert Edit("collective_faster", target="allreduce").kind == EditKind.COLLECTIVE_FASTER


@pytest.mark.parametrize("text,edit", [
    ("collective_faster:allreduce=3", Edit.collective_faster("allreduce", 3.0)),
    ("kernel_faster:gemm", Edit.kernel_faster("gemm", 2.0)),
    ("kernel_faster:attention=1.5x", Edit.kernel_faster("attention", 1.5)),
    ("microbatches=4", Edit.more_microbatches(4)),
    ("data_parallel=8", Edit.data_parallel(8)),
    ("remove_injection", Edit.remove_injection(0)),
    (" remove_injection=2 ", Edit.remove_injection(2)),
])
def test_parse_edit(text: str, edit: Edit) -> None:
    assert parse_edit(text) == edit
    assert edit_to_json(parse_edit(text))["kind"] == str(edit.kind)


@pytest.mark.parametrize("text,message", [
    ("faster=2", "unknown kind 'faster'"),
    ("collective_faster:alltoallv=2", "unknown collective 'alltoallv'"),
    ("data_parallel", "give the new degree"),
    ("data_parallel=2.5", "whole number"),
    ("microbatches=1", "integer >= 2"),
    ("kernel_faster:gemm=-2", "expected KIND[:TARGET][=NUMBER]"),
])
def test_parse_edit_rejects(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_edit(text)


def test_step_rows_keep_steps_of_either_side_with_null_where_missing(tmp_path: Path) -> None:
    rows = step_rows({(1, 0): 10.0, (2, 0): 11.0}, {(2, 0): 5.5, (2, 1): 6.0})
    assert rows == [[1, 0, 10.0, None], [2, 0, 11.0, 5.5], [2, 1, None, 6.0]]
    write_whatif(tmp_path, [{"edit": edit_to_json(Edit.data_parallel(4)), "step_ms": rows}])
    data = json.loads((tmp_path / WHATIF_NAME).read_text())
    assert data["edits"][0]["edit"]["value"] == 4 and data["edits"][0]["step_ms"][0][3] is None
