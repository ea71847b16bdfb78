"""Critical path and attribution on tiny hand-built traces whose answer is known by construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.graph import Bottleneck, Category
from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.graph.types import CATEGORIES
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import kernel, op, runtime, step, sync, write


def _us(r: StepReport) -> dict[str, float]:
    return {c.value: v / 1000 for c, v in r.breakdown_ns.items() if v}


def _path_names(a, r: StepReport) -> list[str]:  # type: ignore[no-untyped-def]
    return [a.graph.node_name(n) for n in r.path_node.tolist() if n >= 0]


def test_nesting_launch_stream_and_device_sync(tmp_path: Path) -> None:
    # CPU: step [0,100ms]; mm [10,30ms] launches K1 at 15ms; add [40,50ms] launches K2 at 42ms;
    # a device sync [60ms, 90ms+5µs]. GPU: K1 [15ms+8µs, 70ms]; K2 queued behind K1 until 70ms+2µs.
    events = [
        step(1, 0, 100_000),
        op("aten::mm", 10_000, 20_000), runtime("cudaLaunchKernel", 15_000, 5, corr=1),
        op("aten::add", 40_000, 10_000), runtime("cudaLaunchKernel", 42_000, 5, corr=2),
        runtime("cudaDeviceSynchronize", 60_000, 30_005, corr=3),
        kernel("K1", 15_008, 54_992, corr=1), kernel("K2", 70_002, 19_998, corr=2),
    ]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    (r,) = a.steps
    assert r.wall_ns == 100_000_000
    # idle: 10 ms before mm + 9.995 ms after the sync; cpu: mm up to its launch; launch: 8 µs to
    # start K1 + 2 µs between K1 and K2; GPU: both kernels; sync: the 5 µs the sync took to return
    assert _us(r) == {"gpu_compute": 74_990, "launch_overhead": 10, "cpu": 5_000, "sync_wait": 5, "idle": 19_995}
    names = _path_names(a, r)
    assert names.index("aten::mm") < names.index("K1") < names.index("K2") < names.index("cudaDeviceSynchronize")
    assert "aten::add" not in names  # its launch had 28 ms of slack behind K1
    g = a.graph
    by_name = {g.node_name(i): i for i in range(len(g))}
    assert a.slack_ns[by_name["aten::add"]] > 20_000_000
    assert a.slack_ns[by_name["K1"]] == 0 and a.slack_ns[by_name["K2"]] == 0


def test_two_streams_with_stream_wait_event(tmp_path: Path) -> None:
    # KA on stream 7 ends at 50 ms; stream 20 waits for the event recorded after KA, so KB starts
    # 4 µs after KA ends although it was launched at 5 ms; a device sync returns 6 µs after KB.
    events = [
        step(1, 0, 70_000),
        runtime("cudaLaunchKernel", 5_000, 3, corr=1),
        runtime("cudaEventRecord", 5_010, 1, corr=2),
        runtime("cudaStreamWaitEvent", 5_012, 1, corr=3),
        sync("Stream Wait Event", 5_012, 1, corr=3, stream=20, wait_on_stream=7,
             wait_on_cuda_event_record_corr_id=2),
        runtime("cudaLaunchKernel", 5_014, 3, corr=4),
        runtime("cudaDeviceSynchronize", 30_000, 28_006, corr=5),
        sync("Context Sync", 30_000, 28_006, corr=5),
        kernel("KA", 5_006, 44_994, corr=1, stream=7), kernel("KB", 50_004, 7_996, corr=4, stream=20),
    ]
    a = analyze(read_trace(write(tmp_path / "t.json.gz", events)))
    (r,) = a.steps
    assert _us(r) == {"gpu_compute": 52_990, "launch_overhead": 6, "sync_wait": 10, "idle": 16_994}
    names = _path_names(a, r)
    assert names.index("KA") < names.index("KB") < names.index("cudaDeviceSynchronize")


def _allreduce_rank(busy_us: int) -> list[dict]:
    # compute for busy_us, launch an all-reduce 1 ms later, wait for it on the host
    launch = 5_000 + busy_us + 1_000
    return [
        step(1, 0, 100_000),
        op("aten::mm", 5_000, busy_us),
        runtime("cudaLaunchKernel", launch, 5, corr=1),
        runtime("cudaStreamSynchronize", launch + 10, 82_005 - launch - 10, corr=2),
        sync("Stream Sync", launch + 10, 82_005 - launch - 10, corr=2, stream=20),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
               launch + 8, 82_000 - launch - 8, corr=1, stream=20),
    ]


@pytest.fixture()
def late_rank_job(tmp_path: Path) -> Path:
    write(tmp_path / "job" / "rank0.json.gz", _allreduce_rank(busy_us=2_000), rank=0, world=2)
    write(tmp_path / "job" / "rank1.json.gz", _allreduce_rank(busy_us=59_000), rank=1, world=2)
    return tmp_path / "job"


def test_two_rank_allreduce_goes_through_the_late_rank(late_rank_job: Path) -> None:
    a = analyze(read_trace(late_rank_job))
    r0, r1 = a.steps
    assert (r0.rank, r1.rank) == (0, 1)
    assert a.graph.collectives.reliable.tolist() == [True]
    # rank 1 arrives at 65.008 ms after 59 ms of aten::mm; the all-reduce itself then takes 16.992 ms
    assert _us(r1) == {"communication": 16_992, "cpu": 59_000, "launch_overhead": 8, "sync_wait": 5,
                       "idle": 23_995}
    # rank 0 waited inside its kernel from 8 ms: its path crosses to rank 1, whose work before
    # arriving stays work (rank 0's step was bound by it) and whose idle time is communication
    # (waiting for a late rank) from rank 0's point of view
    assert _us(r0) == {"communication": 16_992 + 1_000 + 5_000, "cpu": 59_000, "launch_overhead": 8,
                       "sync_wait": 5, "idle": 17_995}
    assert 1 in r0.path_rank.tolist()
    straggler = [f for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK]
    assert [(f.step, f.ranks) for f in straggler] == [(1, (1,))]
    assert straggler[0].impact_ms == pytest.approx(57.0)


def test_every_breakdown_sums_to_the_wall_time(late_rank_job: Path) -> None:
    a = analyze(read_trace(late_rank_job))
    for r in a.steps:
        assert sum(r.breakdown_ns.values()) == r.wall_ns
        assert int(r.path_dur_ns.sum()) == r.wall_ns
        assert set(r.breakdown_ns) == set(Category)


def test_path_nodes_are_the_work_on_the_path_in_order_each_once() -> None:
    cat = {c: CATEGORIES.index(c) for c in (Category.CPU, Category.IDLE, Category.COMMUNICATION)}
    nodes = np.array([5, -1, 3, 5, 7, 9], dtype=np.int64)  # 5 twice (a parent around 3), 7 an idle gap's owner
    cats = np.array([cat[Category.CPU], cat[Category.IDLE], cat[Category.CPU], cat[Category.CPU],
                     cat[Category.IDLE], cat[Category.COMMUNICATION]], dtype=np.int8)
    empty = np.zeros(0, dtype=np.int64)
    r = StepReport(step=1, rank=0, start_ns=0, end_ns=1, breakdown_ns={}, path_node=nodes, path_category=cats,
                   path_rank=np.zeros(6, dtype=np.int32), path_start_ns=empty, path_dur_ns=empty, start_point=0,
                   end_point=1)
    assert r.path_nodes().tolist() == [5, 3, 9]
