"""Kineto parsing details: exact timestamps, units, large integers, AMD strings, flows, windows."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from bottleneck_oracle.traces import EventKind, read_trace
from bottleneck_oracle.traces.kineto import _exact_us_to_ns
from tests.conftest import REAL
from tests.tracebuilder import kernel, op, runtime, write


def test_exact_decimal_timestamps_keep_nanoseconds() -> None:
    assert _exact_us_to_ns(b"1712195495519761.132") == 1712195495519761132
    assert _exact_us_to_ns(b"5.5") == 5500
    assert _exact_us_to_ns(b"7") == 7000
    assert _exact_us_to_ns(b"1.23456") == 1235


def test_epoch_float_trace_keeps_ns_digits() -> None:
    # ns_resolution writes ts as epoch µs with 3 decimals: float64 would round them to 0.25 µs
    path = REAL / "hta" / "ns_resolution" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    trace = read_trace(path)
    raw = gzip.decompress(path.read_bytes()).decode()
    first = next(e for e in json.loads(raw)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    text = raw[raw.index('"ts":', raw.index(json.dumps(first["name"]))):].split(",")[0].split(":")[1].strip()
    abs_ns = trace.events.start_ns + trace.origin_ns
    assert _exact_us_to_ns(text.encode()) in set(abs_ns.tolist())
    assert (abs_ns % 1000 != 0).mean() > 0.5  # the ns digits survived


def test_base_time_nanoseconds_is_added() -> None:
    path = REAL / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    trace = read_trace(path)
    assert trace.ranks[0].base_ns == doc["baseTimeNanoseconds"]
    cpu = trace.events.kind == EventKind.CPU_OP
    assert int(trace.events.start_ns[cpu].min()) + trace.origin_ns == doc["baseTimeNanoseconds"] + round(first * 1000)


def test_comms_id_beyond_int64_is_kept() -> None:
    trace = read_trace(REAL / "hta" / "large_integer")
    assert 10159970886766084423 in trace.events.comms_id.tolist()


def test_amd_hip_trace_links_launches_with_string_args() -> None:
    trace = read_trace(REAL / "hta" / "amd_mi250")
    ev = trace.events
    names = np.array(trace.strings)[ev.name]
    assert (np.char.startswith(names[ev.kind == EventKind.RUNTIME].astype(str), "hip")).all()
    kernels = ev.kind == EventKind.KERNEL
    assert kernels.any() and (ev.correlation[kernels] >= 0).all()


def test_bare_event_array_and_uncompressed_file(tmp_path: Path) -> None:
    path = tmp_path / "bare.json"
    path.write_text(json.dumps([op("aten::mm", 10, 5), op("aten::add", 20, 5)]))
    trace = read_trace(path)
    assert sorted(trace.strings[i] for i in trace.events.name) == ["aten::add", "aten::mm"]
    assert trace.events.dur_ns.tolist() == [5000, 5000]


def test_kernel_without_correlation_arg_takes_it_from_its_flow(tmp_path: Path) -> None:
    k = kernel("K", 12, 3, corr=5)
    del k["args"]["correlation"]
    flow = {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 12, "bp": "e"}
    trace = read_trace(write(tmp_path / "t.json.gz", [runtime("cudaLaunchKernel", 10, 2, corr=5), k, flow]))
    kernels = trace.events.kind == EventKind.KERNEL
    assert trace.events.correlation[kernels].tolist() == [5]


def test_span_past_the_window_is_clamped_to_it() -> None:
    # triton_example: a ProfilerStep#1 of 13.3 s inside a 355 ms window
    from bottleneck_oracle.analysis.analysis import analyze

    a = analyze(read_trace(REAL / "hta" / "triton_example"))
    (r,) = a.steps
    assert r.step == 1 and r.wall_ns < 2_000_000
