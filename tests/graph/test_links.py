from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.graph import EdgeType, build_graph
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import kernel, runtime, step, write


def _sync_pairs(events: list[dict], path: Path) -> set[tuple[str, str]]:
    g = build_graph(read_trace(write(path, events)))
    src, dst = g.edges_of(EdgeType.SYNC)
    return {(g.node_name(s), g.node_name(d)) for s, d in zip(src.tolist(), dst.tolist())}


def test_late_start_after_another_stream_infers_a_stream_wait(tmp_path: Path) -> None:
    # no cuda_sync events: KB was launched at 1 ms on an idle stream but started 5 µs after KA ended
    events = [step(1, 0, 60_000), runtime("cudaLaunchKernel", 0, 5, corr=1), runtime("cudaLaunchKernel", 1_000, 5, corr=2),
              kernel("KA", 10, 49_990, corr=1, stream=7), kernel("KB", 50_005, 1_000, corr=2, stream=20)]
    assert ("KA", "KB") in _sync_pairs(events, tmp_path / "t.json.gz")


def test_prompt_start_infers_nothing(tmp_path: Path) -> None:
    events = [step(1, 0, 60_000), runtime("cudaLaunchKernel", 0, 5, corr=1), runtime("cudaLaunchKernel", 49_990, 5, corr=2),
              kernel("KA", 10, 49_990, corr=1, stream=7), kernel("KB", 50_005, 1_000, corr=2, stream=20)]
    assert _sync_pairs(events, tmp_path / "t.json.gz") == set()


def test_blocking_copy_waits_for_its_copy(tmp_path: Path) -> None:
    copy = kernel("Memcpy DtoH (Device -> Pageable)", 12, 30, corr=1, cat="gpu_memcpy")
    events = [step(1, 0, 100), runtime("cudaMemcpyAsync", 10, 35, corr=1), copy]
    assert _sync_pairs(events, tmp_path / "t.json.gz") == {("Memcpy DtoH (Device -> Pageable)", "cudaMemcpyAsync")}


def test_async_copy_that_outlives_its_call_does_not_block(tmp_path: Path) -> None:
    copy = kernel("Memcpy HtoD (Pinned -> Device)", 12, 30, corr=1, cat="gpu_memcpy")
    events = [step(1, 0, 100), runtime("cudaMemcpyAsync", 10, 5, corr=1), copy]
    assert _sync_pairs(events, tmp_path / "t.json.gz") == set()
