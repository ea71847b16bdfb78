"""Flight Recorder dumps: read without running code, in every version's shape, and bad files named."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces.flight_recorder import read_flight_record


def entry(seq: int, op: str = "all_reduce", *, group: str = "0", done: bool = True, sizes=((4,),),
          line: int = 10, record: int | None = None) -> dict:
    return {"record_id": seq - 1 if record is None else record, "pg_id": 0 if group == "0" else 1,
            "process_group": (group, "default_pg"),
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "profiling_name": f"nccl:{op}",
            "time_created_ns": 1_000_000 * seq, "input_sizes": [list(s) for s in sizes],
            "input_dtypes": ["Float"], "output_sizes": [list(s) for s in sizes], "output_dtypes": ["Float"],
            "state": "completed" if done else "scheduled", "retired": done, "timeout_ms": 600000, "is_p2p": False,
            "frames": [{"filename": "/x/site-packages/torch/distributed/distributed_c10d.py", "line": 1,
                        "name": op},
                       {"filename": "/job/train.py", "line": line, "name": "step"}]}


def dump(entries: list[dict], ranks: str = "[0, 1]", status: dict | None = None, version: str = "2.10") -> dict:
    out = {"version": version, "entries": entries, "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                                      "ranks": ranks}}}
    if status is not None:
        out["pg_status"] = status
    return out


def write(folder: Path, dumps: dict[int, dict], prefix: str = "nccl_trace_rank_") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, d in dumps.items():
        (folder / f"{prefix}{rank}").write_bytes(pickle.dumps(d))
    return folder


class RunsCode:
    """A pickle that runs a command when loaded, as a hostile dump would."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_reads_ranks_entries_and_groups(tmp_path: Path) -> None:
    record = read_flight_record(write(tmp_path, {0: dump([entry(1), entry(2, done=False)]),
                                                 1: dump([entry(1)])}))
    assert sorted(record.dumps) == [0, 1]
    first = record.dumps[0].entries[1]
    assert (first.seq, first.op, first.retired) == (2, "all_reduce", False)
    assert first.where == "/job/train.py:10"  # the first frame outside torch
    assert record.groups["0"].ranks == (0, 1)
    assert record.missing_ranks == ()


def test_pickle_that_would_run_code_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    folder = write(tmp_path / "dumps", {0: dump([entry(1)])})
    (folder / "nccl_trace_rank_1").write_bytes(pickle.dumps({"entries": [RunsCode(marker)], "version": "2.10"}))
    with pytest.raises(TraceFormatError, match=r"nccl_trace_rank_1: refused: it names (posix|os)\.system"):
        read_flight_record(folder)
    assert not marker.exists()


def test_truncated_and_foreign_files_are_named_and_skipped(tmp_path: Path) -> None:
    folder = write(tmp_path, {0: dump([entry(1)]), 1: dump([entry(1)])})
    whole = (folder / "nccl_trace_rank_1").read_bytes()
    (folder / "nccl_trace_rank_1").write_bytes(whole[: len(whole) // 2])
    (folder / "nccl_trace_rank_2").write_text("not a dump at all\n")
    record = read_flight_record(folder)
    assert sorted(record.dumps) == [0]
    reasons = {p.name: why for p, why in record.skipped}
    assert set(reasons) == {"nccl_trace_rank_1", "nccl_trace_rank_2"}
    assert "truncated" in reasons["nccl_trace_rank_1"]
    assert record.missing_ranks == (1,)  # the group lists it; its file could not be read


def test_empty_folder_and_no_readable_dump_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no Flight Recorder dump"):
        read_flight_record(tmp_path)
    (tmp_path / "nccl_trace_rank_0").write_bytes(b"\x80\x04")
    with pytest.raises(TraceFormatError, match="no readable Flight Recorder dump.*nccl_trace_rank_0"):
        read_flight_record(tmp_path)
    with pytest.raises(TraceFormatError, match="no such file"):
        read_flight_record(tmp_path / "gone")


def test_json_dumps_read_like_pickles(tmp_path: Path) -> None:
    d = dump([entry(1), entry(2, done=False)], status={"0": {"last_enqueued_collective": "2",
                                                           "last_started_collective": "-1",
                                                           "last_completed_collective": "1"}})
    (tmp_path / "nccl_trace_rank_0.json").write_text(json.dumps(d))
    status = read_flight_record(tmp_path).dumps[0].status["0"]
    assert (status.enqueued, status.completed) == (2, 1)  # counters written as strings


@pytest.mark.parametrize("drop, rename", [
    # what older torch versions' dumps lack: pg_status (2.4), is_p2p and dtypes, the collective/p2p split of seq
    (("pg_status",), {}),
    (("is_p2p", "input_dtypes", "output_dtypes", "frames"), {}),
    (("is_p2p", "p2p_seq_id"), {"collective_seq_id": "seq_id"}),
])
def test_older_shapes_read_with_what_they_have(tmp_path: Path, drop: tuple[str, ...], rename: dict) -> None:
    entries = []
    for e in [entry(1), entry(2, done=False)]:
        e = {rename.get(k, k): v for k, v in e.items() if k not in drop}
        entries.append(e)
    d = dump(entries, status={"0": {"last_enqueued_collective": 2, "last_started_collective": -1,
                                   "last_completed_collective": 1}}, version="2.2")
    for key in drop:
        d.pop(key, None)
    write(tmp_path, {0: d})
    got = read_flight_record(tmp_path).dumps[0]
    assert [(e.seq, e.op, e.is_p2p) for e in got.entries] == [(1, "all_reduce", False), (2, "all_reduce", False)]


def test_gloo_default_group_with_an_unnamed_config(tmp_path: Path) -> None:
    # torch 2.13's gloo dumps: the config's name is "", the entries call the group "0" (torchfrtrace: KeyError)
    d = dump([entry(1)])
    d["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[0, 1, 2]"}}
    write(tmp_path, {0: d, 1: d})
    record = read_flight_record(tmp_path)
    assert record.groups["0"].ranks == (0, 1, 2)
    assert record.missing_ranks == (2,)


def test_prefixes_tied_need_a_name(tmp_path: Path) -> None:
    write(tmp_path, {0: dump([entry(1)])}, prefix="a_rank_")
    write(tmp_path, {0: dump([entry(1)])}, prefix="b_rank_")
    with pytest.raises(TraceFormatError, match="several prefixes"):
        read_flight_record(tmp_path)
    assert read_flight_record(tmp_path, prefix="b_rank_").dumps[0].path.name == "b_rank_0"


def test_ranks_read_in_parallel_as_in_one_process(tmp_path: Path) -> None:
    from bottleneck_oracle.executor import LocalExecutor

    fixture = Path(__file__).parents[1] / "data" / "hangs" / "subgroup"
    assert read_flight_record(fixture, executor=LocalExecutor(2)) == read_flight_record(fixture)
    folder = write(tmp_path, {0: dump([entry(1)]), 1: dump([entry(1)])})
    (folder / "nccl_trace_rank_2").write_bytes(pickle.dumps({"entries": [RunsCode(tmp_path / "ran")]}))
    with pytest.raises(TraceFormatError, match="nccl_trace_rank_2: refused"):
        read_flight_record(folder, executor=LocalExecutor(2))
    assert not (tmp_path / "ran").exists()
