"""Property: whatever damage a trace carries, reading and analysing it ends in a result or a
one-line bad-input error (``OracleError``, exit 2 in the CLI), never another exception.

Seeds are windows of real captures: a 2-rank CPU/gloo DDP job (examples/gpt_2rank), a GPU
trace with event syncs (cp_cuda_event_sync), a window of an NCCL step (nccl_parser_config), and
public traces of other projects (wild/): an H100 step with Python frames (with_stack) and its
user-annotation ProfilerStep, and an MI300 step rewritten in PyTorch 1.9's categories.
Each case drops, duplicates and moves events, removes fields, replaces values by None,
negatives, fractions, 1e300, 2**62..., changes phases and categories, writes the files to a
folder and runs ``read_trace`` + ``analyze`` on it as ``oracle analyze`` does.
"""

from __future__ import annotations

import copy
import gzip
import json
import tempfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.errors import OracleError
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL, REPO, WILD
from tests.old_kineto import to_pytorch19

Doc = dict
_VALUES = [None, 0, -1, -7, 3.5, -2.25, 1e300, -1e300, 2**62, -(2**62), 2**64, 10**30, 1e12, 4e15, 1e-3,
           "", "x", "0x1f", "1e300", [], [1, 2], {}, {"a": 1}, True]
# names the analysis reads meaning into
_NAMES = ["ProfilerStep#1", "ProfilerStep#99999999999999999999", "ProfilerStep#-3", "ProfilerStep#", "gloo:all_reduce",
          "nccl:all_reduce", "c10d::allreduce_", "c10d::send", "c10d::recv_", "cudaStreamSynchronize",
          "cudaDeviceSynchronize", "Event Sync", "Stream Wait Event", "cudaLaunchKernel", "cudaGraphLaunch",
          "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "Optimizer.step#SGD.step", "aten::item",
          "hipMemcpyWithStream", "cudaMemcpyAsync", "__amd_rocclr_copyBuffer.kd", "__amd_rocclr_fillBufferAligned.kd",
          "MEMORY_COPY_DEVICE_TO_HOST", "stream 7", "profiler.py(724): step"]
_PHASES = ["X", "B", "E", "i", "I", "M", "s", "f", "C", "b", "e", "", None, 5]
_CATS = [None, "", "cpu_op", "kernel", "cuda_runtime", "user_annotation", "gpu_memcpy", "cuda_sync", "fwdbwd",
         "ac2g", "Trace", "gpu_user_annotation", "python_function", "unknown", 7,
         "Operator", "Runtime", "Kernel", "Memcpy", "Memset", "async"]
_ARGS = ["External id", "external id", "correlation", "stream", "device", "bytes", "Sequence number", "cuda_sync_kind",
         "wait_on_stream", "wait_on_cuda_event_record_corr_id", "Collective name", "In msg nelems", "dtype",
         "Group size", "Process Group Name", "Process Group ID", "Process Group Ranks", "Seq", "Comms Id",
         "Input Dims", "Concrete Inputs", "name"]
_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "bp"]
_NODE_KEYS = ["id", "parent", "rf_id", "tid", "name", "inputs", "input_types", "outputs", "output_types", "attrs",
              "ctrl_deps"]


def _load(path: Path) -> Doc:
    return json.loads(gzip.decompress(path.read_bytes()))


def _window(doc: Doc, step: str, ops: int) -> Doc:
    """The file's header and metadata, the step's annotations and communication ops, and its first
    ``ops`` other events (ops, runtime calls, kernels, flows), in time order."""
    events = doc["traceEvents"]
    s = next(e for e in events if e.get("name") == step)
    lo, hi = s["ts"], s["ts"] + s["dur"]
    inside = sorted((e for e in events if e.get("ph") != "M" and lo <= e.get("ts", -1) <= hi), key=lambda e: e["ts"])
    special = [e for e in inside if e.get("cat") in ("user_annotation", "Trace")
               or e.get("name", "").startswith(("c10d::", "gloo:", "nccl:", "record_param_comms"))]
    chosen = {id(e) for e in special}
    plain = [e for e in inside if id(e) not in chosen][:ops]
    keep = sorted(special + plain, key=lambda e: e["ts"])
    return {**doc, "traceEvents": [e for e in events if e.get("ph") == "M"] + keep}


@cache
def _seeds() -> tuple[tuple[Doc, ...], ...]:
    gpt = REPO / "examples" / "gpt_2rank"
    gpu = REAL / "hta" / "cp_cuda_event_sync" / "event_sync_trace.json.gz"
    nccl = REAL / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
    et = REAL / "hta" / "execution_trace"
    stacks = WILD / "tracelens" / "h100" / "bert_small" / "trace.json.gz"
    rocm = WILD / "tracelens" / "mi300" / "bert_small" / "trace.json.gz"
    return (
        tuple(_window(_load(gpt / f"rank{r}.pt.trace.json.gz"), "ProfilerStep#3", 250) for r in (0, 1)),
        (_load(gpu),),
        (_window(_load(nccl), "ProfilerStep#5", 200),),
        (_load(et / "benchmark_simple_add_trace.json.gz"), _load(et / "benchmark_simple_add_et.json.gz")),
        (_window(_load(stacks), "ProfilerStep#6", 250),),
        (to_pytorch19(_window(_load(rocm), "ProfilerStep#6", 250)),),
    )


def _mutate(data: st.DataObject, events: list, keys: list[str]) -> None:
    """One damage to ``events`` (or execution-trace nodes), in place."""
    if not events:
        events.append(data.draw(st.sampled_from(_VALUES)))
        return
    i = data.draw(st.integers(0, len(events) - 1))
    what = data.draw(st.sampled_from(["drop", "duplicate", "move", "remove", "value", "negate", "fraction",
                                      "phase", "cat", "arg", "not an object", "time"]))
    e = events[i]
    if what == "drop":
        del events[i]
    elif what == "duplicate":
        events.insert(data.draw(st.integers(0, len(events))), copy.deepcopy(e))
    elif what == "move":
        events.insert(data.draw(st.integers(0, len(events) - 1)), events.pop(i))
    elif what == "not an object":
        events[i] = data.draw(st.sampled_from([5, "x", [], None]))
    elif not isinstance(e, dict):
        return
    elif what == "remove" and e:
        del e[data.draw(st.sampled_from(sorted(e)))]
    elif what == "time":  # a valid time, but another event's start, or a far longer span
        other = events[data.draw(st.integers(0, len(events) - 1))]
        if isinstance(other, dict) and isinstance(other.get("ts"), (int, float)) and data.draw(st.booleans()):
            e["ts"] = other["ts"]
        elif isinstance(e.get("dur"), (int, float)):
            e["dur"] = e["dur"] * data.draw(st.sampled_from([0, 10, 1000, 10**6]))
    elif what in ("value", "negate", "fraction"):
        key = data.draw(st.sampled_from(keys))
        old = e.get(key)
        if key == "name" and data.draw(st.booleans()):
            e[key] = data.draw(st.sampled_from(_NAMES))
        elif what == "value" or not isinstance(old, (int, float)) or isinstance(old, bool):
            e[key] = data.draw(st.sampled_from(_VALUES))
        else:
            e[key] = -old if what == "negate" else old + 0.5
    elif what == "phase":
        e["ph"] = data.draw(st.sampled_from(_PHASES))
    elif what == "cat":
        e["cat"] = data.draw(st.sampled_from(_CATS))
    elif what == "arg":
        args = e.setdefault("args", {})
        if isinstance(args, dict):
            key = data.draw(st.sampled_from(sorted(args) + _ARGS))
            old = args.get(key)
            args[key] = data.draw(st.sampled_from(_VALUES + _NAMES[4:6] + [
                -old if isinstance(old, int) else 0, old + 1 if isinstance(old, int) else 1]))


def _mutate_header(data: st.DataObject, doc: Doc) -> None:
    key = data.draw(st.sampled_from(["baseTimeNanoseconds", "distributedInfo", "deviceProperties"]))
    if key == "distributedInfo" and isinstance(doc.get(key), dict) and data.draw(st.booleans()):
        doc[key][data.draw(st.sampled_from(["rank", "world_size"]))] = data.draw(st.sampled_from(_VALUES))
    elif data.draw(st.booleans()):
        doc.pop(key, None)
    else:
        doc[key] = data.draw(st.sampled_from(_VALUES))


def _damaged(data: st.DataObject) -> list[tuple[str, bytes]]:
    """The files of one damaged job: each rank's document, a few events damaged, rarely its header
    or its text cut short."""
    seed = data.draw(st.sampled_from(_seeds()))
    files = []
    for r, original in enumerate(seed):
        doc = copy.deepcopy(original)
        items, keys = (doc["nodes"], _NODE_KEYS) if "nodes" in doc else (doc["traceEvents"], _KEYS)
        for _ in range(data.draw(st.integers(0 if len(seed) > 1 else 1, 12))):
            _mutate(data, items, keys)
        if data.draw(st.integers(0, 19)) == 0:
            _mutate_header(data, doc)
        text = json.dumps(doc).encode()
        if data.draw(st.integers(0, 29)) == 0:
            text = text[: data.draw(st.integers(0, len(text) - 1))]
        files.append(("rank0_et.json" if "nodes" in doc else f"rank{r}.json", text))
    return files


def _check(files: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files:
            (Path(tmp) / name).write_bytes(text)
        try:
            analyze(read_trace(Path(tmp)))
        except OracleError as e:
            message = str(e)
            assert "\n" not in message and message
            assert any(name in message for name, _ in files) or Path(tmp).name in message, message


_COMMON = {"deadline": None, "database": None, "derandomize": True, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


@settings(max_examples=150, **_COMMON)
@given(st.data())
def test_damaged_traces_end_in_a_result_or_a_bad_input_error(data: st.DataObject) -> None:
    _check(_damaged(data))


@pytest.mark.slow
@settings(max_examples=5000, **_COMMON)
@given(st.data())
def test_damaged_traces_fuzz_long(data: st.DataObject) -> None:
    _check(_damaged(data))
