"""Graph building: edges of every type on hand-built traces, and on real ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bottleneck_oracle.graph import EdgeType, NodeKind, build_graph
from bottleneck_oracle.graph.points import build_point_graph
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA, REAL
from tests.tracebuilder import kernel, op, runtime, step, write


def test_nest_thread_launch_and_stream_edges(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100), op("aten::mm", 10, 20), runtime("cudaLaunchKernel", 12, 3, corr=1),
        op("aten::add", 40, 10), runtime("cudaLaunchKernel", 42, 3, corr=2),
        kernel("K1", 14, 30, corr=1), kernel("K2", 45, 5, corr=2),
        {"ph": "X", "cat": "gpu_user_annotation", "name": "label", "pid": 0, "tid": 7, "ts": 13, "dur": 40},
    ]
    g = build_graph(read_trace(write(tmp_path / "t.json.gz", events)))
    name = {g.node_name(i): i for i in range(len(g))}
    assert "label" not in name  # GPU labels are not work
    edges = set(zip(g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_type.tolist()))
    step_node = name["ProfilerStep#1"]
    assert (step_node, name["aten::mm"], EdgeType.NEST) in edges
    assert (name["aten::mm"], name["aten::add"], EdgeType.THREAD_NEXT) in edges
    first_launch = next(i for i in range(len(g)) if g.node_name(i) == "cudaLaunchKernel")
    assert (first_launch, name["K1"], EdgeType.LAUNCH) in edges
    assert (name["cudaLaunchKernel"], name["K2"], EdgeType.LAUNCH) in edges
    assert (name["K1"], name["K2"], EdgeType.STREAM_NEXT) in edges
    assert g.parent[first_launch] == name["aten::mm"] and g.parent[name["cudaLaunchKernel"]] == name["aten::add"]
    assert g.step.tolist() == [1] * len(g)  # kernels belong to the step that launched them
    assert g.launch_ns[name["K2"]] == 42_000


def test_graph_launch_links_every_kernel_of_the_graph(tmp_path: Path) -> None:
    events = [runtime("cudaGraphLaunch", 0, 5, corr=9)] + [kernel(f"G{i}", 10 + 10 * i, 8, corr=9) for i in range(4)]
    g = build_graph(read_trace(write(tmp_path / "t.json.gz", events)))
    src, dst = g.edges_of(EdgeType.LAUNCH)
    assert len(dst) == 4 and set(g.kind[dst].tolist()) == {NodeKind.KERNEL}


def test_to_networkx_round_trip() -> None:
    g = build_graph(read_trace(REAL / "hta" / "cp_cuda_event_sync"))
    nxg = g.to_networkx()
    assert nxg.number_of_nodes() == len(g) and nxg.number_of_edges() == len(g.edge_src)
    types = {d["type"] for _, _, d in nxg.edges(data=True)}
    assert {"nest", "launch", "sync", "stream_next"} <= types


def test_every_cuda_sync_kind_makes_edges() -> None:
    # cp_cuda_event_sync has Context, Event and Stream Sync; the multi-stream one a Stream Wait Event
    for folder in ("cp_cuda_event_sync", "cp_cuda_event_sync_multi_stream"):
        g = build_graph(read_trace(REAL / "hta" / folder))
        src, dst = g.edges_of(EdgeType.SYNC)
        gpu = g.trace.lanes.is_gpu
        assert gpu[g.lane[src]].all()
        if folder.endswith("multi_stream"):
            assert gpu[g.lane[dst]].any()  # a stream waited for another stream
        assert (~gpu[g.lane[dst]]).any()  # the host waited for the GPU


def test_autograd_thread_handoffs_on_gpu_trace() -> None:
    g = build_graph(read_trace(REAL / "hta" / "nccl_parser_config"))
    src, dst = g.edges_of(EdgeType.SYNC)
    cpu = ~g.trace.lanes.is_gpu
    across = cpu[g.lane[src]] & cpu[g.lane[dst]] & (g.lane[src] != g.lane[dst])
    labels = {(g.trace.lanes.label[g.lane[s]], g.trace.lanes.label[g.lane[d]]) for s, d in zip(src[across], dst[across])}
    # the main thread hands backward to the autograd thread and gets it back, every step
    assert any("pt_main" in a and "autograd" in b for a, b in labels)
    assert any("autograd" in a and "pt_main" in b for a, b in labels)
    assert np.count_nonzero(across) >= 6


def test_two_edges_that_each_put_the_other_node_first_are_dropped() -> None:
    # a damaged trace the fuzz found (tests/traces/test_fuzz.py): a zero-length ProfilerStep and a
    # zero-length c10d::allreduce_ at one instant, each inferred to wait for the other: a cycle
    g = build_graph(read_trace(DATA / "zero_length_instant"))
    sync = g.edge_type == EdgeType.SYNC
    forward = g.edge_src[sync].astype(np.int64) << 32 | g.edge_dst[sync]
    assert not np.isin(forward, g.edge_dst[sync].astype(np.int64) << 32 | g.edge_src[sync]).any()
    pg = build_point_graph(g)  # raised GraphError
    assert len(pg.index.order) == len(pg.t)


def test_an_eager_send_keeps_only_its_collective_edge() -> None:
    # a real CPU pipeline capture at 8 micro-batches: a gloo send returned before its peer posted the
    # receive, so the receive was inferred to wait for it, against the collective edge between the two
    g = build_graph(read_trace(DATA / "pipeline_eager_send"))
    s, d, kind = g.edge_src, g.edge_dst, g.edge_type
    eager = (kind == EdgeType.COLLECTIVE) & (g.end_ns[d] < g.start_ns[s])  # receive → send, done before
    assert eager.any()
    sync = s[kind == EdgeType.SYNC].astype(np.int64) << 32 | d[kind == EdgeType.SYNC]
    assert not np.isin(d[eager].astype(np.int64) << 32 | s[eager], sync).any()
