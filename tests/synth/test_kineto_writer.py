"""Tests for synth/kineto_writer.py: the traces hold what real Kineto traces hold, and our reader
and DAG builder read them back with every rank, step and collective."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from bottleneck_oracle.graph import build_graph
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.kineto_meta import pid_of
from bottleneck_oracle.synth.kineto_writer import rank_data, render_rank
from bottleneck_oracle.synth.schedule import run
from bottleneck_oracle.synth.synthesize import synthesize
from bottleneck_oracle.synth.training_step import host_sync_count
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.injection import parse_injection

CONFIG = SynthConfig(model="gpt2-small", dp=2, tp=2, pp=2, microbatches=2, steps=3, first_step=4,
                     injections=(parse_injection("host_sync@5:5=2"), parse_injection("checkpoint_stall@6:2=8MB")))


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    synthesize(out, CONFIG, workers=2)
    return out


def _doc(job_dir: Path, rank: int) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(gzip.decompress((job_dir / f"rank{rank}.pt.trace.json.gz").read_bytes()))
    return doc


def test_trace_top_level_and_threads(job_dir: Path) -> None:
    doc = _doc(job_dir, 3)
    assert doc["distributedInfo"]["rank"] == 3 and doc["distributedInfo"]["world_size"] == 8
    assert doc["baseTimeNanoseconds"] % 1_000_000_000 == 0 and len(doc["deviceProperties"]) == 8
    events = doc["traceEvents"]
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    pid = pid_of(3)
    assert {f"thread {pid} (pt_main_thread)", f"thread {pid + 37} (pt_autograd_0)", "stream 7 "} <= threads
    assert all(len(repr(e["ts"]).split(".")[-1]) <= 3 for e in events if isinstance(e.get("ts"), float))


def test_every_kind_of_event_is_there(job_dir: Path) -> None:
    events = _doc(job_dir, 5)["traceEvents"]
    kinds = Counter((e["ph"], e.get("cat")) for e in events)
    assert kinds[("s", "ac2g")] == kinds[("f", "ac2g")] == kinds[("X", "kernel")] + kinds[("X", "gpu_memcpy")]
    assert kinds[("s", "fwdbwd")] == kinds[("f", "fwdbwd")] > 0
    names = Counter(e["name"] for e in events if e["ph"] == "X")
    for name in ("ProfilerStep#4", "ProfilerStep#6", "## forward ##", "## backward ##", "Optimizer.step#AdamW.step",
                 "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "Memcpy HtoD (Pinned -> Device)",
                 "aten::linear", "aten::_scaled_dot_product_flash_attention", "aten::layer_norm", "aten::gelu",
                 "aten::ones_like", "autograd::engine::evaluate_function: AddmmBackward0", "aten::mm",
                 "aten::cross_entropy_loss", "aten::_foreach_addcdiv_", "c10d::allreduce_", "record_param_comms",
                 "nccl:all_reduce", "c10d::send", "c10d::recv_", "cudaStreamWaitEvent", "cudaEventRecord",
                 "Stream Wait Event", "Stream Sync", "aten::item", "cudaStreamSynchronize",
                 "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                 "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"):
        assert names[name] > 0, name
    assert names["aten::item"] == 3 + host_sync_count(2)  # one loss.item() a step and the injected host syncs
    assert names["checkpoint_save"] == 0 and "checkpoint_save" in {e["name"] for e in _doc(job_dir, 2)["traceEvents"]}


def test_launches_syncs_and_comm_args_are_linked(job_dir: Path) -> None:
    events = _doc(job_dir, 0)["traceEvents"]
    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy"):
            call = runtime[e["args"]["correlation"]]
            assert call["name"] in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync")
            assert call["args"]["External id"] == e["args"]["External id"] and call["ts"] <= e["ts"]
    for e in events:
        if e.get("cat") == "cuda_sync":
            assert runtime[e["args"]["correlation"]]["name"] in ("cudaStreamWaitEvent", "cudaStreamSynchronize")
            if e["name"] == "Stream Wait Event":
                assert runtime[e["args"]["wait_on_cuda_event_record_corr_id"]]["name"] == "cudaEventRecord"
                assert e["args"]["wait_on_stream"] != e["args"]["stream"] == e["tid"]
    comm = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")]
    assert all({"Process Group Name", "Seq", "In msg nelems", "Collective name"} <= set(e["args"]) for e in comm)
    assert {e["tid"] for e in comm}.isdisjoint({7})


def test_reader_and_dag_get_every_rank_step_and_collective(job_dir: Path) -> None:
    trace = read_trace(job_dir)
    assert [info.rank for info in trace.ranks] == list(range(8))
    assert all(info.devices[0] == "NVIDIA H100 80GB HBM3" and info.world_size == 8 for info in trace.ranks)
    graph = build_graph(trace)
    steps = set(zip(graph.steps.rank.tolist(), graph.steps.step.tolist()))
    assert steps == {(r, s) for r in range(8) for s in (4, 5, 6)}
    table = graph.collectives
    assert len(table) > 50 and table.reliable.all() and set(table.key) == {"seq"}
    assert set(table.kind) == {"allreduce", "sendrecv"}
    assert (table.members == 2).all()  # tp, dp and pipeline pairs all have two ranks here
    assert graph.nesting_overlaps == 0


def test_dag_step_times_equal_the_ground_truth(job_dir: Path) -> None:
    truth = run(CONFIG)[0]
    graph = build_graph(read_trace(job_dir))
    wall = (graph.steps.end_ns - graph.steps.start_ns) / 1e6
    for rank, step, ms in zip(graph.steps.rank.tolist(), graph.steps.step.tolist(), wall.tolist()):
        assert ms == pytest.approx(truth.ms(step, rank), abs=0.002)


def test_rendering_is_deterministic() -> None:
    _, timeline = run(SynthConfig(model="tiny", dp=2, steps=2))
    first, count = render_rank(rank_data(timeline, 1))
    again, _ = render_rank(rank_data(timeline, 1))
    assert first == again and count == len(orjson.loads(gzip.decompress(first))["traceEvents"])
    assert np.frombuffer(first[4:8], dtype="<u4")[0] == 0  # gzip header carries no date


def test_runtime_calls_carry_the_id_of_their_innermost_cpu_op(job_dir: Path) -> None:
    events = _doc(job_dir, 0)["traceEvents"]
    ids = {e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
    launches = [e for e in events if e.get("name") == "cudaLaunchKernelExC"]
    assert launches and all(ids[e["args"]["External id"]]["name"] == "record_param_comms" for e in launches)
    gemms = [e for e in events if e.get("name") == "cudaLaunchKernel"]
    assert {ids[e["args"]["External id"]]["cat"] for e in gemms} == {"cpu_op"}
