"""Damaged traces: one bad event costs that event (counted by reason), never the file; a file is
refused with a one-line reason only when nothing usable remains or it is not a trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.health import HealthCode, trace_health
from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces import EventKind, read_trace
from tests.tracebuilder import op, step, write

STEP = step(1, 0, 100)
MM = op("aten::mm", 10, 5, **{"External id": 4})


def _file(path: Path, events: list, **header: object) -> Path:
    path.write_text(json.dumps({"traceEvents": events, **header}))
    return path


def _error(path: Path) -> str:
    with pytest.raises(TraceFormatError) as err:
        read_trace(path)
    assert "\n" not in str(err.value)
    return str(err.value)


def _names(trace: object) -> list[str]:
    return sorted(trace.strings[i] for i in trace.events.name)  # type: ignore[attr-defined]


def test_empty_event_list_is_refused(tmp_path: Path) -> None:
    assert _error(_file(tmp_path / "empty.json", [])) == "empty.json: holds no events"


def test_events_without_cat_are_refused_when_nothing_else_remains(tmp_path: Path) -> None:
    events = [{k: v for k, v in e.items() if k != "cat"} for e in (STEP, MM)]
    assert _error(_file(tmp_path / "nocat.json", events)) == (
        "nocat.json: no usable events; 2 of 2 skipped (no cat: 2)")


def test_metadata_only_file_is_refused(tmp_path: Path) -> None:
    meta = {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}
    assert _error(_file(tmp_path / "meta.json", [meta])) == (
        "meta.json: no usable events: no complete ('ph' X) event of a known 'cat'")


def test_timestamp_1e300_costs_its_event_only(tmp_path: Path) -> None:
    trace = read_trace(_file(tmp_path / "huge.json", [STEP, {**MM, "ts": 1e300}]))
    assert _names(trace) == ["ProfilerStep#1"] and trace.skipped_events == {"ts out of range": 1}
    (report,) = analyze(trace).steps
    assert report.step == 1 and report.wall_ns == 100_000


def test_fractional_external_id_costs_its_event_only(tmp_path: Path) -> None:
    bad = op("aten::add", 20, 5, **{"External id": 3.5})
    trace = read_trace(_file(tmp_path / "extid.json", [STEP, MM, bad]))
    assert _names(trace) == ["ProfilerStep#1", "aten::mm"]
    assert trace.skipped_events == {"bad External id": 1} == trace.ranks[0].skipped_events
    assert trace.events.external_id[trace.events.kind == EventKind.CPU_OP].tolist() == [4]
    assert len(analyze(trace).steps) == 1


def _without(event: dict, key: str) -> dict:
    return {k: v for k, v in event.items() if k != key}


@pytest.mark.parametrize(("damaged", "reason"), [
    ({**MM, "ts": None}, "no ts"),
    (_without(MM, "ts"), "no ts"),
    ({**MM, "ts": "soon"}, "bad ts"),
    ({**MM, "ts": 2**62}, "ts out of range"),
    ({**MM, "ts": -(2**62)}, "ts out of range"),
    ({**MM, "ts": 10**400}, "ts out of range"),
    (_without(MM, "dur"), "no dur"),
    ({**MM, "dur": -5}, "negative dur"),
    ({**MM, "dur": 1e300}, "dur out of range"),
    ({**MM, "dur": 2**62}, "dur out of range"),
    ({**MM, "args": {"External id": 2**64}}, "bad External id"),
    ({**MM, "args": {"correlation": "abc"}}, "bad correlation"),
    ({**MM, "args": {"stream": "inf"}}, "bad stream"),
    ({**MM, "args": {"Comms Id": 2**64}}, "bad Comms Id"),
    ({**MM, "args": {"Group size": 2**40}}, "bad Group size"),
    ({**MM, "args": {"Process Group Ranks": [1.5]}}, "bad Process Group Ranks"),
    ({**MM, "args": 5}, "bad args"),
    ({**MM, "name": ["aten::mm"]}, "bad name"),
    ({**MM, "ph": None}, "bad ph"),
    (_without(MM, "cat"), "no cat"),
    (7, "not an object"),
])
def test_each_damaged_field_skips_its_event_with_its_reason(tmp_path: Path, damaged: object, reason: str) -> None:
    trace = read_trace(_file(tmp_path / "t.json", [STEP, op("aten::add", 30, 5), damaged]))
    assert _names(trace) == ["ProfilerStep#1", "aten::add"]
    assert trace.skipped_events == {reason: 1}
    analyze(trace)


def test_events_of_a_category_not_read_are_counted_by_category(tmp_path: Path) -> None:
    # another accelerator's device events (HTA's MTIA traces) must not vanish without a word;
    # the profiler's own overhead rows are no ops and go unsaid
    device = {**op("dma_request", 40, 5), "cat": "mtia_ccp_events"}
    overhead = {**op("CUPTI Overhead", 50, 1), "cat": "overhead"}
    trace = read_trace(_file(tmp_path / "t.json", [STEP, MM, device, device, overhead]))
    assert _names(trace) == ["ProfilerStep#1", "aten::mm"]
    assert trace.skipped_events == {"category not read: mtia_ccp_events": 2}
    (note,) = [h for h in trace_health(analyze(trace)) if h.code == HealthCode.SKIPPED_EVENTS]
    assert "2 event(s) malformed or of a category not read skipped" in note.message


def test_large_but_valid_values_are_kept(tmp_path: Path) -> None:
    kept = [op("a", 10, 1, **{"External id": 2**62}), op("b", 20, 1, **{"Comms Id": 10159970886766084423}),
            op("c", 30, 1, stream="0x1f"), op("d", 4e15, 1e12)]
    trace = read_trace(_file(tmp_path / "t.json", [STEP, *kept]))
    assert trace.skipped_events == {} and len(trace.events) == 5
    ev = trace.events
    assert 2**62 in ev.external_id.tolist() and 10159970886766084423 in ev.comms_id.tolist()
    assert 31 in ev.stream.tolist() and 10**15 in ev.dur_ns.tolist()


def test_damaged_side_events_are_counted(tmp_path: Path) -> None:
    flow = {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 100, "tid": 1, "ts": 1e300}
    mark = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": 1, "ts": 0,
            "dur": -1}
    trace = read_trace(_file(tmp_path / "t.json", [STEP, MM, flow, {**flow, "ts": 12, "id": "x"}, mark]))
    assert len(trace.events) == 2 and len(trace.flows) == 0
    assert trace.skipped_events == {"ts out of range": 1, "bad id": 1, "bad dur": 1}


def test_epoch_float_times_stay_exact_next_to_skipped_events(tmp_path: Path) -> None:
    # epoch-scale float ts are re-read from their text: skipped items must not shift the rows
    a, b = op("a", 0, 1.5), op("b", 0, 1)
    events = [5, {**a, "ts": None}, {**a, "ts": "A"}, {**b, "ts": "B", "dur": -1}, {**b, "ts": "B"}]
    text = json.dumps({"traceEvents": events})
    text = text.replace('"A"', "1712195495519761.132").replace('"B"', "1712195495519770.5")
    (tmp_path / "t.json").write_text(text)
    trace = read_trace(tmp_path / "t.json")
    assert trace.skipped_events == {"not an object": 1, "no ts": 1, "negative dur": 1}
    assert sorted((trace.events.start_ns + trace.origin_ns).tolist()) == [1712195495519761132, 1712195495519770500]


def test_counts_are_summed_over_rank_files_and_kept_per_rank(tmp_path: Path) -> None:
    write(tmp_path / "rank0.json.gz", [STEP, MM, {**MM, "dur": -1}], rank=0, world=2)
    write(tmp_path / "rank1.json.gz", [STEP, MM, {**MM, "dur": -1}, {**MM, "ts": None}], rank=1, world=2)
    trace = read_trace(tmp_path)
    assert trace.skipped_events == {"negative dur": 2, "no ts": 1}
    assert [dict(r.skipped_events) for r in trace.ranks] == [{"negative dur": 1}, {"negative dur": 1, "no ts": 1}]


def test_a_rank_file_left_empty_is_an_empty_rank(tmp_path: Path) -> None:
    write(tmp_path / "rank0.json.gz", [STEP, MM], rank=0, world=2)
    write(tmp_path / "rank1.json.gz", [{**MM, "ts": "x"}], rank=1, world=2)
    trace = read_trace(tmp_path)
    assert [(r.rank, r.events) for r in trace.ranks] == [(0, 2), (1, 1)]
    assert set(trace.events.rank.tolist()) == {0} and trace.skipped_events == {"bad ts": 1}
    assert [(s.step, s.rank) for s in analyze(trace).steps] == [(1, 0)]


@pytest.mark.parametrize(("header", "message"), [
    ({"baseTimeNanoseconds": 2**70}, f"t.json: baseTimeNanoseconds {2**70} is out of range"),
    ({"baseTimeNanoseconds": -1}, "t.json: baseTimeNanoseconds -1 is out of range"),
    ({"distributedInfo": {"rank": 2**40}}, f"t.json: distributedInfo.rank {2**40} is out of range"),
    ({"distributedInfo": {"rank": 0, "world_size": -2}}, "t.json: distributedInfo.world_size -2 is out of range"),
])
def test_a_header_out_of_range_refuses_the_file(tmp_path: Path, header: dict, message: str) -> None:
    assert _error(_file(tmp_path / "t.json", [STEP, MM], **header)) == message


# the CLI as users run it: damaged input exits 0 (a result) or 2 (one line naming the file), never 1
@pytest.mark.parametrize(("events", "code", "stderr"), [
    ([], 2, "error: t.json: holds no events"),
    ([_without(STEP, "cat"), _without(MM, "cat")], 2, "error: t.json: no usable events; 2 of 2 skipped"),
    ([STEP, {**MM, "ts": 1e300}], 0, ""),
    ([STEP, MM, op("aten::add", 20, 5, **{"External id": 3.5})], 0, ""),
])
def test_cli_exit_codes_on_damaged_traces(tmp_path: Path, events: list, code: int, stderr: str) -> None:
    path = _file(tmp_path / "t.json", events)
    out = subprocess.run([sys.executable, "-m", "bottleneck_oracle", "analyze", str(path), "--json"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == code, out.stderr
    if code:
        assert out.stderr.startswith(stderr) and out.stderr.count("\n") == 1
    else:
        assert json.loads(out.stdout)["steps"]
