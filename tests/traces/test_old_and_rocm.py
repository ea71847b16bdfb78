"""Traces of other generations and vendors read as their modern equivalents: PyTorch 1.8-1.9 Kineto
(old categories, ``async`` flows, lowercase ``external id``, no ``cuda_sync``) and ROCm 7's copies and
fills recorded as kernels."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.types import CATEGORIES, Bottleneck, Category, NodeKind, Role
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import EventKind, read_trace
from bottleneck_oracle.truth.injection import parse_injection
from tests.old_kineto import to_pytorch19
from tests.tracebuilder import kernel, op, runtime, step, write


@pytest.fixture(scope="module")
def host_sync_twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A synthetic GPU job with blocking ``.item()`` copies in step 3 (cuda_sync events on), and its
    PyTorch 1.9 twin."""
    modern = tmp_path_factory.mktemp("modern")
    config = SynthConfig(model="gpt2-small", hardware="H100", dp=2, steps=4,
                         injections=(parse_injection("host_sync@3=20ms"),))
    synthesize(modern, config)
    old = tmp_path_factory.mktemp("old")
    for path in modern.glob("*.json.gz"):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        (old / path.name).write_bytes(gzip.compress(json.dumps(to_pytorch19(doc)).encode()))
    return modern, old


def test_pytorch19_twin_reads_as_its_modern_original(host_sync_twins: tuple[Path, Path]) -> None:
    modern, old = (read_trace(p) for p in host_sync_twins)
    assert not (old.events.kind == EventKind.SYNC).any() and (modern.events.kind == EventKind.SYNC).any()
    work = modern.events.kind != EventKind.SYNC
    for column in ("kind", "start_ns", "dur_ns", "correlation", "external_id", "stream"):
        assert np.array_equal(getattr(modern.events, column)[work], getattr(old.events, column)), column
    assert np.array_equal(modern.lanes.stream, old.lanes.stream)


def test_pytorch19_twin_gives_the_same_steps_breakdowns_and_findings(host_sync_twins: tuple[Path, Path]) -> None:
    a, b = (analyze(read_trace(p)) for p in host_sync_twins)
    assert [(r.step, r.rank, r.wall_ns) for r in a.steps] == [(r.step, r.rank, r.wall_ns) for r in b.steps]
    for x, y in zip(a.steps, b.steps):
        assert x.breakdown_ns == y.breakdown_ns
        assert np.array_equal(x.path_node, y.path_node)
    assert [(f.category, f.step, f.ranks, f.impact_ms) for f in a.findings] == \
        [(f.category, f.step, f.ranks, f.impact_ms) for f in b.findings]
    assert {(f.category, f.step) for f in b.findings} >= {(Bottleneck.HOST_SYNC, 3)}


def test_pytorch19_twin_waits_through_the_copy_it_synced_on(host_sync_twins: tuple[Path, Path]) -> None:
    # no cuda_sync events: the stream sync after each .item() copy still waits for that copy
    b = analyze(read_trace(host_sync_twins[1]))
    g = b.graph
    sync_cat = CATEGORIES.index(Category.SYNC_WAIT)
    for r in (r for r in b.steps if r.step == 3):
        assert r.breakdown_ns[Category.SYNC_WAIT] > 1_000_000
        waits = np.flatnonzero((r.path_category == sync_cat) & (r.path_node >= 0))
        waits = waits[(g.role[r.path_node[waits]] == Role.SYNC) & (waits > 0)]
        assert len(waits) > 100  # one per .item()
        before = r.path_node[waits - 1]
        assert (g.kind[before] == NodeKind.MEMCPY).all()


def test_async_flow_and_stream_row_name_give_the_launch(tmp_path: Path) -> None:
    # PyTorch 1.8: GPU row "stream 7", the kernel's correlation only in its "async" flow
    k = kernel("K", 12, 3, corr=5, cat="Kernel")
    k["tid"], k["args"] = "stream 7", {"device": 0}
    launch = runtime("cudaLaunchKernel", 10, 2, corr=5)
    launch["cat"] = "Runtime"
    launch["args"]["external id"] = launch["args"].pop("External id")
    flow = {"ph": "f", "cat": "async", "name": "launch", "id": 5, "pid": 0, "tid": "stream 7", "ts": 12, "bp": "e"}
    trace = read_trace(write(tmp_path / "t.json.gz", [op("aten::mm", 9, 5, cat="Operator"), launch, k, flow]))
    kernels = trace.events.kind == EventKind.KERNEL
    assert trace.events.correlation[kernels].tolist() == [5]
    assert trace.lanes.stream[trace.events.lane[kernels]].tolist() == [7]
    calls = trace.events.kind == EventKind.RUNTIME
    assert trace.events.external_id[calls].tolist() == [5]
    assert (trace.events.kind == EventKind.CPU_OP).sum() == 1


def test_profiler_step_as_cpu_op_makes_steps(tmp_path: Path) -> None:
    events = []
    for n in (1, 2, 3):
        s = step(n, n * 100, 90)
        s["cat"] = "Operator"  # PyTorch 1.8 recorded the step range as an operator
        events += [s, op("aten::mm", n * 100 + 10, 50, cat="Operator")]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    assert [r.step for r in a.steps] == [1, 2, 3]
    assert all(r.wall_ns > 0 for r in a.steps)


@pytest.mark.parametrize("name,kind", [
    ("__amd_rocclr_copyBuffer.kd", EventKind.MEMCPY), ("__amd_rocclr_copyBufferAligned.kd", EventKind.MEMCPY),
    ("MEMORY_COPY_DEVICE_TO_HOST", EventKind.MEMCPY), ("__amd_rocclr_fillBufferAligned.kd", EventKind.MEMSET),
    ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", EventKind.KERNEL),
])
def test_rocm_copy_and_fill_kernels_read_as_copies_and_fills(tmp_path: Path, name: str, kind: EventKind) -> None:
    events = [runtime("hipMemcpyAsync", 10, 4, corr=1), kernel(name, 20, 30, corr=1)]
    trace = read_trace(write(tmp_path / "t.json.gz", events))
    gpu = trace.events.kind != EventKind.RUNTIME
    assert trace.events.kind[gpu].tolist() == [kind]
    g = analyze(trace).graph
    node_kind = {EventKind.MEMCPY: NodeKind.MEMCPY, EventKind.MEMSET: NodeKind.MEMSET}.get(kind, NodeKind.KERNEL)
    assert g.kind[trace.lanes.is_gpu[g.lane]].tolist() == [node_kind]
