"""Tests for traces/op_table_kineto.py: the op table derived from real pipeline captures, and the kept fixtures."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.traces.op_table_kineto import op_table_from_kineto, write_op_table
from tests.conftest import DATA

PIPELINE = DATA / "pipeline"
RAW = PIPELINE / "slow_worker"  # the one job kept with its Kineto traces
MICROBATCHES = 4
COLUMNS = ["dp_rank", "stage", "rank", "step", "optype", "start_ts", "duration", "seq_id", "mc", "gmc", "mb_id"]
# 1F1B on two stages: stage 0 runs one warm-up forward, stage 1 none
ONE_F_ONE_B = {0: ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"], 1: ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]}


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    return {name: np.asarray(table.column(name).to_pylist()) for name in table.column_names}


@pytest.fixture(scope="module")
def derived() -> tuple[dict[str, np.ndarray], dict[str, object], pa.Table]:
    table, meta = op_table_from_kineto(RAW)
    return _columns(table), meta, table


def _worker_steps(c: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    for rank in np.unique(c["rank"]):
        for step in np.unique(c["step"]):
            rows = np.flatnonzero((c["rank"] == rank) & (c["step"] == step))
            yield int(rank), int(step), rows[np.argsort(c["start_ts"][rows], kind="stable")]


def _op(c: dict[str, np.ndarray], rows: np.ndarray, optype: str, seq: int) -> int:
    hit = rows[(c["optype"][rows] == optype) & (c["seq_id"][rows] == seq)]
    assert len(hit) == 1, (optype, seq)
    return int(hit[0])


def test_table_has_the_study_columns_and_the_job_layout(derived) -> None:  # type: ignore[no-untyped-def]
    c, meta, table = derived
    assert table.column_names == COLUMNS
    assert table.schema.field("start_ts").type == pa.float64() and table.schema.field("duration").type == pa.float64()
    assert meta == {"dp_size": 2, "pp_size": 2, "tp_size": 1, "dsp_size": 1, "vpp_size": 1, "world_size": 4,
                    "trial_name": "slow_worker", "microbatches": MICROBATCHES, "dropped_steps": []}
    assert sorted(np.unique(c["step"]).tolist()) == [2, 3, 4]
    workers = {(int(r), int(d), int(s)) for r, d, s in zip(c["rank"], c["dp_rank"], c["stage"])}
    assert workers == {(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)}  # rank r: stage r % 2 of replica r // 2
    assert (c["mc"] == 0).all() and (c["gmc"] == c["stage"]).all()
    assert (c["duration"] > 0).all() and (c["start_ts"] >= 0).all()


def test_each_stage_runs_the_ops_of_its_neighbours(derived) -> None:  # type: ignore[no-untyped-def]
    c, _, _ = derived
    for rank, step, rows in _worker_steps(c):
        kinds, counts = np.unique(c["optype"][rows], return_counts=True)
        found = dict(zip(kinds.tolist(), counts.tolist()))
        p2p = ({"forward-send": 4, "backward-recv": 4} if rank % 2 == 0 else {"forward-recv": 4, "backward-send": 4})
        assert found == {"forward-compute": 4, "backward-compute": 4, "grads-reduce-scatter": 1, "optimizer": 1,
                         **p2p}, (rank, step)


def test_seq_ids_count_each_type_in_start_order_and_computes_run_1f1b(derived) -> None:  # type: ignore[no-untyped-def]
    c, _, _ = derived
    for rank, step, rows in _worker_steps(c):
        for optype in np.unique(c["optype"][rows]):
            of_type = c["optype"][rows] == optype
            assert c["seq_id"][rows][of_type].tolist() == list(range(of_type.sum()))
        compute = rows[np.char.endswith(c["optype"][rows].astype(str), "-compute")]
        assert (c["mb_id"][compute] == c["seq_id"][compute]).all()
        assert (c["mb_id"][np.setdiff1d(rows, compute)] == -1).all()
        order = [f"{'F' if c['optype'][i].startswith('forward') else 'B'}{c['mb_id'][i]}" for i in compute]
        assert order == ONE_F_ONE_B[rank % 2], (rank, step)


def test_ops_of_a_worker_follow_each_other_inside_their_profiler_step(derived) -> None:  # type: ignore[no-untyped-def]
    c, _, _ = derived
    trace = read_trace(RAW)
    names = np.asarray(trace.strings, dtype=object)[trace.events.name]
    end = c["start_ts"] + c["duration"]
    for rank, step, rows in _worker_steps(c):
        at = np.flatnonzero((trace.events.rank == rank) & (names == f"ProfilerStep#{step}"))
        assert len(at) == 1
        lo, hi = trace.events.start_ns[at[0]] / 1e9, trace.events.end_ns[at[0]] / 1e9
        assert lo - 1e-9 <= c["start_ts"][rows].min() and end[rows].max() <= hi + 1e-9, (rank, step)
        assert (end[rows][:-1] <= c["start_ts"][rows][1:] + 1e-9).all(), (rank, step)  # no two ops overlap
        assert c["optype"][rows[-1]] == "optimizer"
        last_compute = end[rows][np.char.endswith(c["optype"][rows].astype(str), "-compute")].max()
        assert c["start_ts"][_op(c, rows, "grads-reduce-scatter", 0)] >= last_compute


def test_sends_follow_and_receives_precede_their_micro_batch(derived) -> None:  # type: ignore[no-untyped-def]
    c, _, _ = derived
    end = c["start_ts"] + c["duration"]
    for rank, _, rows in _worker_steps(c):
        for k in range(MICROBATCHES):
            f, b = _op(c, rows, "forward-compute", k), _op(c, rows, "backward-compute", k)
            if rank % 2 == 0:  # first stage: sends activations on, receives gradients back
                assert c["start_ts"][_op(c, rows, "forward-send", k)] >= end[f]
                assert end[_op(c, rows, "backward-recv", k)] <= c["start_ts"][b]
            else:
                assert end[_op(c, rows, "forward-recv", k)] <= c["start_ts"][f]
                assert c["start_ts"][_op(c, rows, "backward-send", k)] >= end[b]


def test_a_receive_matches_its_send_across_ranks(derived) -> None:  # type: ignore[no-untyped-def]
    """Rank 1's k-th forward-recv ends no earlier than rank 0's k-th forward-send starts: one transfer."""
    c, _, _ = derived
    end = c["start_ts"] + c["duration"]
    for step in (2, 3, 4):
        for first, last in ((0, 1), (2, 3)):
            sender = np.flatnonzero((c["rank"] == first) & (c["step"] == step))
            receiver = np.flatnonzero((c["rank"] == last) & (c["step"] == step))
            for k in range(MICROBATCHES):
                assert end[_op(c, receiver, "forward-recv", k)] >= c["start_ts"][_op(c, sender, "forward-send", k)]
                assert end[_op(c, sender, "backward-recv", k)] >= c["start_ts"][_op(c, receiver, "backward-send", k)]


def test_the_stage_count_read_from_the_traffic_is_the_one_given() -> None:
    table, meta = op_table_from_kineto(RAW)
    given, _ = op_table_from_kineto(RAW, stages=2)
    assert table.equals(given) and meta["pp_size"] == 2


def test_kept_fixture_table_is_what_the_code_derives(derived, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, meta, table = derived
    write_op_table(table, meta, tmp_path / "out")
    assert pq.read_table(tmp_path / "out" / "trace.parquet").equals(table)
    assert yaml.safe_load((tmp_path / "out" / "meta.yaml").read_text()) == meta
    assert pq.read_table(RAW / "trace.parquet").equals(table)
    assert yaml.safe_load((RAW / "meta.yaml").read_text()) == meta


def _fixture(name: str) -> tuple[dict[str, np.ndarray], dict[str, object], dict[str, object]]:
    folder = PIPELINE / name
    manifest = json.loads((folder / "manifest.json").read_text())
    meta = yaml.safe_load((folder / "meta.yaml").read_text())
    return _columns(pq.read_table(folder / "trace.parquet")), meta, manifest


def _median_compute_ms(c: dict[str, np.ndarray], key: str, value: int) -> float:
    rows = (c[key] == value) & np.char.endswith(c["optype"].astype(str), "-compute")
    return float(np.median(c["duration"][rows]) * 1e3)


def test_slow_worker_fixture_slows_one_rank_in_every_step() -> None:
    slow, _, manifest = _fixture("slow_worker")
    clean, _, clean_manifest = _fixture("slow_worker_clean")
    fault = manifest["fault"]
    assert (fault["rank"], fault["dp_rank"], fault["stage"]) == (2, 1, 0)
    assert fault["steps"] == np.unique(slow["step"]).tolist() == np.unique(clean["step"]).tolist()
    others = [_median_compute_ms(slow, "rank", r) for r in (0, 1, 3)]
    assert _median_compute_ms(slow, "rank", 2) > 2 * max(others)
    for step in fault["steps"]:  # slowed in every step, not only on average
        in_step = {k: v[slow["step"] == step] for k, v in slow.items()}
        others_in_step = [_median_compute_ms(in_step, "rank", r) for r in (0, 1, 3)]
        assert _median_compute_ms(in_step, "rank", 2) > 1.5 * max(others_in_step)
    plain = [_median_compute_ms(clean, "rank", r) for r in range(4)]
    assert max(plain) < 1.6 * min(plain)
    assert manifest["mean_step_s"] > 1.3 * clean_manifest["mean_step_s"]


def test_unbalanced_fixture_loads_one_stage_far_more() -> None:
    unbalanced, _, manifest = _fixture("unbalanced")
    balanced, _, balanced_manifest = _fixture("balanced")
    assert manifest["fault"]["stage_layers"] == [1, 5] and balanced_manifest["fault"]["stage_layers"] == [3, 3]
    assert manifest["config"]["stage_layers"] == [1, 5] and balanced_manifest["config"]["stage_layers"] == []
    assert _median_compute_ms(unbalanced, "stage", 1) > 2 * _median_compute_ms(unbalanced, "stage", 0)
    ratio = _median_compute_ms(balanced, "stage", 1) / _median_compute_ms(balanced, "stage", 0)
    assert 0.6 < ratio < 1.6


def test_every_fixture_is_a_complete_pipeline_table() -> None:
    for name in ("slow_worker", "slow_worker_clean", "unbalanced", "balanced"):
        c, meta, manifest = _fixture(name)
        assert (meta["dp_size"], meta["pp_size"], meta["world_size"], meta["dropped_steps"]) == (2, 2, 4, [])
        assert manifest["command"].startswith("oracle capture ") and manifest["mean_step_s"] > 0
        steps = np.unique(c["step"])
        assert len(c["step"]) == len(steps) * 4 * (4 * MICROBATCHES + 2), name  # 16 ops + reduce + optimizer


def _copy_raw(tmp_path: Path) -> Path:
    out = tmp_path / "job"
    out.mkdir()
    for f in RAW.glob("rank*.pt.trace.json.gz"):
        shutil.copy(f, out / f.name)
    return out


def _edit_events(path: Path, keep) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if keep(e)]
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def _error(folder: Path, **kwargs: object) -> str:
    with pytest.raises(TraceFormatError) as caught:
        op_table_from_kineto(folder, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_a_step_one_rank_lacks_an_op_of_is_dropped(tmp_path: Path) -> None:
    job = _copy_raw(tmp_path)
    doc = json.loads(gzip.decompress((job / "rank3.pt.trace.json.gz").read_bytes()))
    step3 = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#3")
    inside = lambda e: step3["ts"] <= e.get("ts", -1) <= step3["ts"] + step3["dur"]  # noqa: E731
    _edit_events(job / "rank3.pt.trace.json.gz", lambda e: not (e.get("name") == "## backward mb2 ##" and inside(e)))
    table, meta = op_table_from_kineto(job)
    assert meta["dropped_steps"] == [3]
    assert sorted(set(table.column("step").to_pylist())) == [2, 4]
    _edit_events(job / "rank3.pt.trace.json.gz", lambda e: e.get("name") != "## backward mb2 ##")
    assert "no step holds every op on every rank (step 2: rank 3 has 3 backward-compute, expected 4)" in _error(job)


def test_errors_name_the_folder_or_file_and_the_problem(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "empty: folder holds no .json or .json.gz trace file" in _error(tmp_path / "empty")
    assert "4 ranks are not a multiple of 3 pipeline stages" in _error(RAW, stages=3)
    assert "rank0.pt.trace.json.gz: rank 0 sends with rank 1, not its neighbour in a pipeline of 1 stages" in _error(
        RAW, stages=1)
    assert "rank0.pt.trace.json.gz: not a pipeline capture (no '## forward mbK ##' annotations)" in _error(DATA / "gloo_clean")
    assert "not a pipeline capture" in _error(DATA / "gloo_clean", stages=2)


def test_a_send_without_its_peer_rank_is_refused(tmp_path: Path) -> None:
    job = _copy_raw(tmp_path)
    doc = json.loads(gzip.decompress((job / "rank1.pt.trace.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name") == "c10d::send":
            e["args"].pop("Concrete Inputs", None)
    (job / "rank1.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert "rank1.pt.trace.json.gz: c10d::send at" in _error(job, stages=2)
    assert "names no peer rank" in _error(job, stages=2)


def test_a_truncated_trace_is_named(tmp_path: Path) -> None:
    job = _copy_raw(tmp_path)
    data = (job / "rank2.pt.trace.json.gz").read_bytes()
    (job / "rank2.pt.trace.json.gz").write_bytes(data[: len(data) // 2])
    assert "rank2.pt.trace.json.gz: truncated or corrupt gzip" in _error(job)


@pytest.mark.slow
def test_a_fresh_capture_with_uneven_stage_layers_derives_and_splits_as_asked(tmp_path: Path) -> None:
    from bottleneck_oracle.capture.capture import capture
    from bottleneck_oracle.capture.config import CaptureConfig

    config = CaptureConfig(ranks=2, steps=2, layers=3, d_model=32, heads=2, seq_len=16, batch_size=4, vocab=64,
                           pipeline=2, microbatches=2, stage_layers=(1, 2), timeout_s=120)
    capture(tmp_path, config)
    table, meta = op_table_from_kineto(tmp_path)
    assert (meta["dp_size"], meta["pp_size"], meta["microbatches"], meta["dropped_steps"]) == (1, 2, 2, [])
    assert "grads-reduce-scatter" not in table.column("optype").to_pylist()  # one replica: nothing to reduce
    trace = read_trace(tmp_path)
    names = np.asarray(trace.strings, dtype=object)[trace.events.name]
    for rank, blocks in ((0, 1), (1, 2)):  # two layer norms per block, and the final one on the last stage
        forward = np.flatnonzero((trace.events.rank == rank) & (names == "## forward mb0 ##"))[0]
        inside = ((trace.events.rank == rank) & (trace.events.start_ns >= trace.events.start_ns[forward])
                  & (trace.events.end_ns <= trace.events.end_ns[forward]))
        assert int((inside & (names == "aten::layer_norm")).sum()) == 2 * blocks + rank
