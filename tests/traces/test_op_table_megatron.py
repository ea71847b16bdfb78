"""Tests for traces/op_table_megatron.py: the study's op table from Megatron timers recorded as profiler ranges."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bottleneck_oracle.errors import ConfigError, TraceFormatError
from bottleneck_oracle.graph.pipeline import build_job_graph
from bottleneck_oracle.job.stragglers import analyze_stragglers
from bottleneck_oracle.traces.op_table import JobLayout, op_table_from_arrow
from bottleneck_oracle.traces.op_table_megatron import op_table_from_megatron_ranges
from bottleneck_oracle.workspace.stragglers import load_op_table
from tests.conftest import STRAGGLERS, run_oracle
from tests.tracebuilder import op, step, write

ST_LAYOUT = JobLayout(2, 4, name="ST")  # DP 2 x PP 4: rank = stage * 2 + dp_rank
STEPS = 3
BASE_US = 1_000_000.0


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    return {name: np.asarray(table.column(name).to_pylist()) for name in table.column_names}


def _range(name: str, ts_us: float, dur_us: float, cat: str = "user_annotation") -> dict:
    return op(name, round(ts_us, 3), round(dur_us, 3), cat=cat)


def _write_job(folder: Path, c: dict[str, np.ndarray], world: int) -> None:
    """One Kineto file per recorded rank of the table ``c``: a ProfilerStep#N per step, the steps laid end to end,
    and one user-annotation range per row (its op type, its times in µs)."""
    offset, per_rank = BASE_US, {int(r): [] for r in np.unique(c["rank"])}
    for n in np.unique(c["step"]):
        rows = np.flatnonzero(c["step"] == n)
        span_us = float((c["start_ts"][rows] + c["duration"][rows]).max()) * 1e6
        for rank, events in per_rank.items():
            events.append(step(int(n), offset, span_us))
            events += [_range(str(c["optype"][i]), offset + c["start_ts"][i] * 1e6, c["duration"][i] * 1e6)
                       for i in rows[c["rank"][rows] == rank]]
        offset += span_us
    for rank, events in per_rank.items():
        write(folder / f"rank{rank}.pt.trace.json.gz", events, rank=rank, world=world)


@pytest.fixture(scope="module")
def st_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """The study's ST table, its first three steps, written as Megatron timer ranges."""
    table = pq.read_table(STRAGGLERS / "ST" / "trace.parquet")
    c = _columns(table)
    first = np.isin(c["step"], np.unique(c["step"])[:STEPS])
    table = table.filter(pa.array(first))
    folder = tmp_path_factory.mktemp("megatron") / "ST"
    _write_job(folder, _columns(table), world=8)
    return folder, table


def _slowdown(table: pa.Table, source: str) -> float:
    return analyze_stragglers(build_job_graph(op_table_from_arrow(table, ST_LAYOUT, source))).slowdown


def _key(c: dict[str, np.ndarray], i: int) -> tuple[int, int, int, str, int]:
    return int(c["dp_rank"][i]), int(c["stage"][i]), int(c["step"][i]), str(c["optype"][i]), int(c["seq_id"][i])


def test_st_round_trips_rows_types_times_and_slowdown(st_job) -> None:  # type: ignore[no-untyped-def]
    folder, original = st_job
    derived, meta = op_table_from_megatron_ranges(folder, ST_LAYOUT)
    a, b = _columns(original), _columns(derived)
    assert derived.schema.field("start_ts").type == pa.float64()
    assert meta["dp_size"] == 2 and meta["pp_size"] == 4 and meta["world_size"] == 8 and meta["dropped_steps"] == []
    assert meta["microbatches"] == 4
    assert len(b["step"]) == len(a["step"])
    for d, s, n in {(int(d), int(s), int(n)) for d, s, n in zip(a["dp_rank"], a["stage"], a["step"])}:
        wa = (a["dp_rank"] == d) & (a["stage"] == s) & (a["step"] == n)
        wb = (b["dp_rank"] == d) & (b["stage"] == s) & (b["step"] == n)
        assert wa.sum() == wb.sum() > 0
        assert set(b["rank"][wb]) == {s * 2 + d}
    start = {n: a["start_ts"][a["step"] == n].min() for n in np.unique(a["step"])}
    want = {_key(a, i): (a["start_ts"][i] - start[a["step"][i]], a["duration"][i]) for i in range(len(a["step"]))}
    got = {_key(b, i): (b["start_ts"][i], b["duration"][i]) for i in range(len(b["step"]))}
    assert got.keys() == want.keys()  # the same op types and seq_ids on every worker and step
    err = max(max(abs(got[k][0] - want[k][0]), abs(got[k][1] - want[k][1])) for k in want)
    assert err < 1e-6
    compute = np.isin(b["optype"], ["forward-compute", "backward-compute"])
    assert (b["mb_id"][compute] == b["seq_id"][compute]).all() and (b["mb_id"][~compute] == -1).all()
    assert (b["mc"] == 0).all() and (b["gmc"] == b["stage"]).all()
    assert _slowdown(derived, str(folder)) == pytest.approx(_slowdown(original, "ST"), abs=1e-4)


def test_the_cli_reads_a_folder_of_megatron_ranges(st_job) -> None:  # type: ignore[no-untyped-def]
    folder, original = st_job
    done = run_oracle("stragglers", folder, "--dp", 2, "--pp", 4, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["job"]["dp_size"] == 2 and report["job"]["pp_size"] == 4
    assert len(report["job"]["steps"]) == STEPS
    assert report["slowdown"] == pytest.approx(_slowdown(original, "ST"), abs=1e-4)


def test_no_layout_is_a_one_line_config_error(st_job) -> None:  # type: ignore[no-untyped-def]
    folder, _ = st_job
    with pytest.raises(ConfigError) as direct:
        op_table_from_megatron_ranges(folder, None)
    with pytest.raises(ConfigError) as dispatched:
        load_op_table(folder)
    done = run_oracle("stragglers", folder)
    for message in (str(direct.value), str(dispatched.value)):
        assert "--dp and --pp" in message and "\n" not in message and str(folder) in message
    assert done.returncode == 2 and "--dp and --pp" in done.stderr


def test_layout_errors_name_the_file_or_refuse_chunks(st_job) -> None:  # type: ignore[no-untyped-def]
    folder, _ = st_job
    with pytest.raises(TraceFormatError) as small:
        op_table_from_megatron_ranges(folder, JobLayout(1, 4))  # 4 ranks, 8 recorded
    with pytest.raises(ConfigError) as chunks:
        op_table_from_megatron_ranges(folder, JobLayout(2, 4, vpp=2))
    assert str(small.value).startswith("rank0.pt.trace.json.gz: world size 8") and "= 4 ranks" in str(small.value)
    assert "vpp 2" in str(chunks.value) and "\n" not in str(chunks.value)


def _one_step(folder: Path, ranks: dict[int, list[dict]], world: int | None) -> None:
    for rank, events in ranks.items():
        write(folder / f"rank{rank}.json", [step(7, 0, 1000), *events], rank=rank, world=world)


def test_a_combined_range_becomes_both_ops_with_its_span(tmp_path: Path) -> None:
    ranges = {0: [_range("forward-compute", 10, 100), _range("forward-send-backward-recv", 110, 50),
                  _range("backward-compute", 160, 200)],
              1: [_range("forward-recv", 5, 100), _range("forward-compute", 110, 100),
                  _range("backward-send-forward-recv", 210, 40), _range("backward-compute", 250, 200)]}
    _one_step(tmp_path, ranges, world=2)
    table, meta = op_table_from_megatron_ranges(tmp_path, JobLayout(1, 2))
    c = _columns(table)
    rows = {(int(r), str(o), int(q)): (s, d)
            for r, o, q, s, d in zip(c["rank"], c["optype"], c["seq_id"], c["start_ts"], c["duration"])}
    assert len(c["rank"]) == 9 and set(c["step"]) == {7}
    assert rows[(0, "forward-send", 0)] == rows[(0, "backward-recv", 0)] == pytest.approx((105e-6, 50e-6))
    assert rows[(1, "backward-send", 0)] == rows[(1, "forward-recv", 1)] == pytest.approx((205e-6, 40e-6))
    assert rows[(1, "forward-recv", 0)] == pytest.approx((0.0, 100e-6))  # from the step's first range
    assert meta["microbatches"] == 1


def test_ranks_that_are_not_a_group_first_are_skipped(tmp_path: Path) -> None:
    # AR-like: DP 2 x PP 2 x TP 2; ranks 0, 2, 4, 6 are the groups' first; the others carry other times
    ranks = {r: [_range("forward-compute", 10, 100 + r), _range("backward-compute", 120, 200 + r)] for r in range(8)}
    _one_step(tmp_path, ranks, world=8)
    table, meta = op_table_from_megatron_ranges(tmp_path, JobLayout(2, 2, tp=2))
    c = _columns(table)
    workers = {(int(r), int(d), int(s)) for r, d, s in zip(c["rank"], c["dp_rank"], c["stage"])}
    assert workers == {(0, 0, 0), (2, 1, 0), (4, 0, 1), (6, 1, 1)}
    fwd = c["optype"] == "forward-compute"
    assert np.allclose(c["duration"][fwd] * 1e6, 100 + c["rank"][fwd])
    assert meta["tp_size"] == 2 and meta["world_size"] == 8 and len(c["rank"]) == 8


def test_device_ranges_serve_when_the_host_has_none_and_an_enclosing_range_is_trimmed(tmp_path: Path) -> None:
    gpu = [_range("forward-compute", 20, 100, cat="gpu_user_annotation"),
           _range("optimizer", 200, 300, cat="gpu_user_annotation"),
           _range("optimizer-clip-main-grad", 250, 50, cat="gpu_user_annotation")]
    _one_step(tmp_path, {0: gpu}, world=1)
    table, _ = op_table_from_megatron_ranges(tmp_path, JobLayout(1, 1))
    c = _columns(table)
    rows = {str(o): (s, d) for o, s, d in zip(c["optype"], c["start_ts"], c["duration"])}
    assert rows["forward-compute"] == pytest.approx((0.0, 100e-6))
    assert rows["optimizer-clip-main-grad"] == pytest.approx((230e-6, 50e-6))
    assert rows["optimizer"] == pytest.approx((280e-6, 200e-6))  # starts where the clip it holds ends


def test_a_missing_first_rank_names_the_worker(tmp_path: Path) -> None:
    _one_step(tmp_path, {r: [_range("forward-compute", 10, 100)] for r in (0, 1, 3)}, world=4)
    with pytest.raises(TraceFormatError) as missing:
        op_table_from_megatron_ranges(tmp_path, JobLayout(1, 2, tp=2))  # rank 2 is stage 1's first
    assert "rank 2 (dp_rank 0, stage 1)" in str(missing.value)


def test_a_rank_outside_the_layout_names_its_file(tmp_path: Path) -> None:
    _one_step(tmp_path, {r: [_range("forward-compute", 10, 100)] for r in (0, 1, 2)}, world=None)
    with pytest.raises(TraceFormatError) as outside:
        op_table_from_megatron_ranges(tmp_path, JobLayout(1, 2))
    assert str(outside.value) == "rank2.json: rank 2 is outside the layout (dp 1 x pp 2 x tp 1 x dsp 1 = 2 ranks)"
