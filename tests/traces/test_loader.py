"""Reading folders of rank files: ranks, parallel parsing, and bad input (one-line errors)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL
from tests.tracebuilder import op, write

DLRM = REAL / "param" / "dlrm_8rank_kineto"


def _error(paths: object, **kwargs: object) -> str:
    with pytest.raises(TraceFormatError) as err:
        read_trace(paths, **kwargs)  # type: ignore[arg-type]
    message = str(err.value)
    assert "\n" not in message
    return message


def test_parallel_and_serial_reads_are_identical() -> None:
    a, b = read_trace(DLRM, workers=1), read_trace(DLRM, workers=2)
    assert [r.rank for r in a.ranks] == list(range(8))
    assert a.strings == b.strings and a.origin_ns == b.origin_ns
    for field in ("rank", "kind", "name", "lane", "start_ns", "dur_ns", "correlation"):
        assert np.array_equal(getattr(a.events, field), getattr(b.events, field))


def test_rank_from_file_name_when_no_distributed_info(tmp_path: Path) -> None:
    write(tmp_path / "rank-3.json.gz", [op("a", 0, 1)])
    write(tmp_path / "worker_1.json.gz", [op("b", 0, 1)])
    trace = read_trace(tmp_path)
    assert [(r.rank, r.rank_source) for r in trace.ranks] == [(1, "file name"), (3, "file name")]


def test_single_file_without_rank_is_rank_zero(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path / "trace.json.gz", [op("a", 0, 1)]))
    assert [(r.rank, r.rank_source) for r in trace.ranks] == [(0, "single file")]


def test_two_files_without_any_rank_information(tmp_path: Path) -> None:
    write(tmp_path / "a.json.gz", [op("a", 0, 1)])
    write(tmp_path / "b.json.gz", [op("b", 0, 1)])
    assert _error(tmp_path) == (
        "a.json.gz: no distributedInfo and no rank in the file name; cannot tell which rank it holds"
    )


def test_two_files_claiming_one_rank(tmp_path: Path) -> None:
    write(tmp_path / "a.json.gz", [op("a", 0, 1)], rank=1, world=2)
    write(tmp_path / "b.json.gz", [op("b", 0, 1)], rank=1, world=2)
    assert _error(tmp_path) == "a.json.gz and b.json.gz both claim rank 1"


def test_missing_ranks_need_partial(tmp_path: Path) -> None:
    for name in ("worker0_step_12.1694128201545.pt.trace.json.gz", "worker1_step_12.1694128201556.pt.trace.json.gz"):
        shutil.copy(DLRM / name, tmp_path / name)
    message = _error(tmp_path)
    assert message.endswith("world size 8 but rank(s) 2, 3, 4, 5, 6, 7 are missing (pass --partial to analyze the ranks given)")
    assert [r.rank for r in read_trace(tmp_path, partial=True).ranks] == [0, 1]


def test_truncated_gzip(tmp_path: Path) -> None:
    data = (DLRM / "worker0_step_12.1694128201545.pt.trace.json.gz").read_bytes()
    (tmp_path / "cut.json.gz").write_bytes(data[: len(data) // 2])
    assert _error(tmp_path / "cut.json.gz").startswith("cut.json.gz: truncated or corrupt gzip")


def test_truncated_json(tmp_path: Path) -> None:
    raw = gzip.decompress((DLRM / "worker0_step_12.1694128201545.pt.trace.json.gz").read_bytes())
    (tmp_path / "cut.json").write_bytes(raw[: len(raw) // 2])
    assert _error(tmp_path / "cut.json") == "cut.json: truncated JSON"


def test_not_json(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("hello, world")
    assert _error(tmp_path / "notes.json").startswith("notes.json: not valid JSON")


def test_json_that_is_not_a_trace(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"lr": 0.1, "layers": 4}')
    assert _error(tmp_path / "config.json") == (
        "config.json: neither a profiler trace (no 'traceEvents') nor an execution trace (no 'nodes')"
    )


def test_wrong_schema_names_the_field(tmp_path: Path) -> None:
    # a file-level field of the wrong type refuses the file; an event's costs that event only
    (tmp_path / "odd.json").write_text('{"traceEvents": [], "distributedInfo": {"rank": "zero"}}')
    message = _error(tmp_path / "odd.json")
    assert message.startswith("odd.json: unexpected JSON content") and "distributedInfo.rank" in message
    (tmp_path / "soon.json").write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon", "dur": 1}]}')
    assert _error(tmp_path / "soon.json") == "soon.json: no usable events; 1 of 1 skipped (bad ts: 1)"


def test_negative_duration_skips_the_event(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path / "neg.json.gz", [op("aten::mm", 10, 5), op("aten::add", 20, -5)]))
    assert [trace.strings[i] for i in trace.events.name] == ["aten::mm"]
    assert trace.skipped_events == {"negative dur": 1} == trace.ranks[0].skipped_events


def test_missing_path(tmp_path: Path) -> None:
    assert _error(tmp_path / "nowhere") == f"{tmp_path / 'nowhere'}: no such file or folder"
