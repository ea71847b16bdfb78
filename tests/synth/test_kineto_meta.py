"""Tests for synth/kineto_meta.py: top-level keys, distributedInfo, metadata and comm args."""

from __future__ import annotations

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.hardware import HARDWARE
from bottleneck_oracle.synth.kineto_meta import (
    BASE_TIME_NS,
    comm_args,
    comm_kernel_name,
    document,
    kernel_args,
    metadata_events,
    pid_of,
)
from bottleneck_oracle.synth.model import gemm
from bottleneck_oracle.synth.topology import build_topology

TOPOLOGY = build_topology(SynthConfig(model="1b", dp=2, tp=2, pp=2, microbatches=2))


def test_comm_args_name_the_group_and_sequence() -> None:
    tp_group = TOPOLOGY.tp[3]
    args = comm_args(("allreduce", tp_group, 17, 1024, 1024), TOPOLOGY)
    assert args["Collective name"] == "allreduce" and args["Seq"] == 17 and args["dtype"] == "BFloat16"
    assert args["Process Group Ranks"] == "[2, 3]" and args["Group size"] == 2
    assert args["Process Group Name"] == TOPOLOGY.groups[tp_group].name
    assert args["Process Group Description"] == "TENSOR_MODEL_PARALLEL_GROUP"
    rs = comm_args(("reducescatter", TOPOLOGY.dp[0], 0, 800, 400), TOPOLOGY)
    assert (rs["Collective name"], rs["Out msg nelems"], rs["Global rank stride"]) == ("_reduce_scatter_base", 400, 2)
    sendrecv = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
    assert comm_kernel_name("send") == comm_kernel_name("recv") == sendrecv
    assert comm_kernel_name("allreduce").startswith("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(")


def test_document_carries_devices_and_process_groups() -> None:
    doc = document(5, 8, HARDWARE["H200"], TOPOLOGY, [])
    assert doc["schemaVersion"] == 1 and doc["baseTimeNanoseconds"] == BASE_TIME_NS
    devices = doc["deviceProperties"]
    assert len(devices) == 8 and {d["name"] for d in devices} == {"NVIDIA H200"}  # type: ignore[index, union-attr]
    info = doc["distributedInfo"]
    assert info["backend"] == "nccl" and info["rank"] == 5 and info["world_size"] == 8  # type: ignore[index]
    groups = {g["pg_desc"]: g for g in info["pg_config"]}  # type: ignore[index, union-attr]
    assert groups["default_pg"]["ranks"] == list(range(8)) and groups["TENSOR_MODEL_PARALLEL_GROUP"]["ranks"] == [4, 5]
    assert all(5 in g["ranks"] for g in info["pg_config"])  # type: ignore[index, union-attr]


def test_metadata_names_threads_streams_and_the_window() -> None:
    events = metadata_events(9, [7, 20], (0, 5_000))
    pid = pid_of(9)
    names = {(e["pid"], e["tid"]): e["args"] for e in events if e.get("name") == "thread_name"}
    assert names[(pid, pid)] == {"name": f"thread {pid} (pt_main_thread)"}
    assert names[(pid, pid + 37)] == {"name": f"thread {pid + 37} (pt_autograd_0)"}
    assert names[(1, 20)] == {"name": "stream 20 "}  # rank 9 is GPU 1 of its node
    span = next(e for e in events if e.get("cat") == "Trace")
    assert span["dur"] == 5.0 and {e["name"] for e in events if e["ph"] == "i"} == {
        "Iteration Start: PyTorch Profiler", "Record Window End"}


def test_kernel_args_describe_a_launch() -> None:
    args = kernel_args(gemm("g", 4096, 4096, 4096), HARDWARE["H100"])
    assert args["block"] == [384, 1, 1] and len(args["grid"]) == 3  # type: ignore[arg-type]
    assert args["blocks per SM"] > 0
