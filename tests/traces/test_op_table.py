"""Op tables of pipeline jobs: the published tables read whole, and every kind of bad input named in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet as pq
import pytest

from bottleneck_oracle.errors import ConfigError, TraceFormatError
from bottleneck_oracle.traces.op_table import OPTYPES, JobLayout, read_layout, read_op_table
from tests.conftest import STRAGGLERS


def _copy(tmp_path: Path, job: str = "ST", edit=None, meta: str | None = None) -> Path:  # type: ignore[no-untyped-def]
    table = pq.read_table(STRAGGLERS / job / "trace.parquet")
    if edit is not None:
        table = edit(table)
    folder = tmp_path / job
    folder.mkdir()
    pq.write_table(table, folder / "trace.parquet")
    (folder / "meta.yaml").write_text(meta if meta is not None else (STRAGGLERS / job / "meta.yaml").read_text())
    return folder


def test_the_published_table_reads_with_its_layout_and_nanosecond_times() -> None:
    t = read_op_table(STRAGGLERS / "AR")
    raw = pq.read_table(STRAGGLERS / "AR" / "trace.parquet")
    assert (t.layout.dp, t.layout.pp, t.layout.tp, t.layout.world_size, t.layout.name) == (4, 4, 4, 64, "AR")
    assert len(t) == raw.num_rows == 117216
    assert np.array_equal(t.start_ns, np.rint(raw.column("start_ts").to_numpy().astype(np.float64) * 1e9))
    names = np.array(OPTYPES)[t.optype]
    assert (names == raw.column("optype").to_numpy(zero_copy_only=False).astype(str)).all()
    assert len(np.unique(t.steps)) == 44 and (t.end_ns >= t.start_ns).all()


def test_csv_reads_the_same_as_parquet_and_flags_replace_the_meta(tmp_path: Path) -> None:
    raw = pq.read_table(STRAGGLERS / "ST" / "trace.parquet")
    raw = raw.set_column(raw.schema.get_field_index("optype"), "optype", raw.column("optype").cast(pa.string()))
    pyarrow.csv.write_csv(raw, tmp_path / "job.csv")
    from_csv = read_op_table(tmp_path / "job.csv", JobLayout(2, 4))
    from_parquet = read_op_table(STRAGGLERS / "ST")
    for column in ("dp_rank", "stage", "step", "optype", "seq_id", "mb_id"):
        assert np.array_equal(getattr(from_csv, column), getattr(from_parquet, column)), column
    for column in ("start_ns", "duration_ns"):  # pyarrow writes a float32 with 8 digits: 1e-7 of a few seconds
        assert np.abs(getattr(from_csv, column) - getattr(from_parquet, column)).max() <= 500, column


@pytest.mark.parametrize(("edit", "meta", "message"), [
    (lambda t: t.drop_columns(["mb_id"]), None, "missing column(s) mb_id"),
    (lambda t: t.set_column(4, "optype", pa.array(["warp-drive"] * t.num_rows)), None, "unknown op type 'warp-drive'"),
    (lambda t: t.set_column(6, "duration", pa.array(np.where(np.arange(t.num_rows) == 7, -1.0, 0.1))), None,
     "row 7 has duration -1.0"),
    (lambda t: t.filter(pa.compute.not_equal(t.column("dp_rank"), 1)), None, "worker dp_rank 1 stage 0 has no rows"),
    (None, "dp_size: 2\npp_size: 4\nworld_size: 9\n", "dp 2 x pp 4 x tp 1 x dsp 1 = 8, but world_size is 9"),
    (None, "dp_size: 2\npp_size: 0\n", "pp must be a positive integer"),
    (None, "dp_size: 1\npp_size: 4\n", "dp_rank 1 is outside the layout (dp size 1)"),
])
def test_bad_tables_and_layouts_name_the_file_and_the_problem(tmp_path: Path, edit, meta, message) -> None:  # type: ignore[no-untyped-def]
    folder = _copy(tmp_path, edit=edit, meta=meta)
    with pytest.raises(TraceFormatError) as e:
        read_op_table(folder)
    assert message in str(e.value) and str(folder) in str(e.value)
    assert "\n" not in str(e.value)


def test_a_truncated_parquet_and_a_missing_meta_are_one_line_errors(tmp_path: Path) -> None:
    data = (STRAGGLERS / "ST" / "trace.parquet").read_bytes()
    (tmp_path / "trace.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match="no meta.yaml beside it; give the layout"):
        read_op_table(tmp_path)
    with pytest.raises(TraceFormatError, match="trace.parquet: not a readable parquet table"):
        read_op_table(tmp_path, JobLayout(2, 4))
    with pytest.raises(ConfigError, match="no such file or folder"):
        read_op_table(tmp_path / "nope")
    (tmp_path / "meta.yaml").write_text("dp_size: [\n")
    with pytest.raises(TraceFormatError, match="meta.yaml: not a readable YAML file"):
        read_layout(tmp_path / "meta.yaml")


def test_take_keeps_the_layout_and_selects_rows() -> None:
    t = read_op_table(STRAGGLERS / "ST")
    part = t.take(t.stage == 3)
    assert part.layout == t.layout and (part.stage == 3).all() and len(part) == int((t.stage == 3).sum())
