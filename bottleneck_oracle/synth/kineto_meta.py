"""The parts of a Kineto trace around the events: top-level keys, ``distributedInfo``, device properties,
metadata events, and the args Kineto attaches to kernels and communication ops.
"""

from __future__ import annotations

import math

from bottleneck_oracle.synth.hardware import GPUS_PER_NODE, Hardware
from bottleneck_oracle.synth.model import Kernel
from bottleneck_oracle.synth.topology import Topology
from bottleneck_oracle.vocabulary import KernelClass

__all__ = [
    "BASE_TIME_NS", "ORIGIN_NS", "comm_args", "comm_kernel_name", "document", "kernel_args", "metadata_events",
    "pid_of",
]

BASE_TIME_NS = 1_717_200_000_000_000_000  # baseTimeNanoseconds: a whole second, weeks before the run
ORIGIN_NS = 2_000_000_000_000_000  # time 0 of the simulation, relative to the base (~23 days)
_COLLECTIVE_NAME = {"allreduce": "allreduce", "reducescatter": "_reduce_scatter_base",
                    "allgather": "_allgather_base", "send": "send", "recv": "recv"}
_NCCL_KERNEL = {
    "allreduce": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "reducescatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "allgather": "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "send": "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
    "recv": "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
}
_LAUNCH_SHAPE = {  # block size, registers per thread, shared memory, occupancy %
    KernelClass.GEMM: (384, 168, 213_504, 9),
    KernelClass.ATTENTION: (128, 255, 98_304, 12),
    KernelClass.ELEMENTWISE: (128, 32, 0, 100),
    KernelClass.OPTIMIZER: (512, 40, 0, 50),
}


def pid_of(rank: int) -> int:
    """The OS process id of a rank's Python process (also its main thread id)."""
    return 2_400_000 + 1_117 * rank


def comm_kernel_name(kind: str) -> str:
    """The NCCL kernel a c10d op of ``kind`` runs."""
    return _NCCL_KERNEL[kind]


def comm_args(info: tuple[str, int, int, int, int], topology: Topology) -> dict[str, object]:
    """``record_param_comms`` / NCCL kernel args of one communication op.

    Args:
        info: (kind, group index, seq, in elements, out elements).
        topology: the job's process groups.
    """
    kind, group_index, seq, nelems, out = info
    group = topology.groups[group_index]
    ranks = group.ranks
    stride = ranks[1] - ranks[0] if len(ranks) > 1 else 1
    regular = all(b - a == stride for a, b in zip(ranks, ranks[1:]))
    return {
        "Collective name": _COLLECTIVE_NAME[kind], "In msg nelems": nelems, "Out msg nelems": out,
        "Group size": len(ranks), "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]",
        "Global rank start": min(ranks), "Global rank stride": stride if regular else -1,
        "Process Group Name": group.name, "Process Group Description": group.desc,
        "Process Group Ranks": group.ranks_text, "Seq": seq,
    }


def kernel_args(kernel: Kernel, hw: Hardware) -> dict[str, object]:
    """The launch shape Kineto reports for a kernel (grid from its bytes, block from its class)."""
    block, regs, smem, occupancy = _LAUNCH_SHAPE[kernel.kernel_class]
    blocks = int(min(max(kernel.nbytes / (block * 64), 1), 2 ** 31 - 1))
    grid = [min(blocks, 65_535), math.ceil(blocks / 65_535), 1]
    return {
        "registers per thread": regs, "shared memory": smem,
        "blocks per SM": round(blocks / hw.sms, 6), "warps per SM": round(blocks * block / 32 / hw.sms, 6),
        "grid": grid, "block": [block, 1, 1], "est. achieved occupancy %": occupancy,
    }


def _device_properties(hw: Hardware) -> list[dict[str, object]]:
    major, minor = hw.compute_capability
    smem = 233_472 if major >= 9 else 167_936
    return [{
        "id": i, "name": hw.name, "totalGlobalMem": hw.memory_bytes, "computeMajor": major,
        "computeMinor": minor, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65_536, "warpSize": 32, "sharedMemPerBlock": 49_152, "numSms": hw.sms,
        "regsPerMultiprocessor": 65_536, "sharedMemPerBlockOptin": smem - 1024, "sharedMemPerMultiprocessor": smem,
    } for i in range(GPUS_PER_NODE)]


def metadata_events(rank: int, streams: list[int], window_ns: tuple[int, int]) -> list[dict[str, object]]:
    """Process and thread names, the profiler span and the window marks of one rank."""
    pid, device = pid_of(rank), rank % GPUS_PER_NODE
    t0, t1 = (ORIGIN_NS + window_ns[0]) / 1000, (ORIGIN_NS + window_ns[1]) / 1000

    def meta(name: str, p: int | str, tid: int | str, key: str, value: object) -> dict[str, object]:
        return {"name": name, "ph": "M", "ts": t0, "pid": p, "tid": tid, "args": {key: value}}

    events = [
        meta("process_name", pid, 0, "name", "python3.11"), meta("process_labels", pid, 0, "labels", "CPU"),
        meta("process_sort_index", pid, 0, "sort_index", pid),
        meta("process_name", device, 0, "name", "python3.11"),
        meta("process_labels", device, 0, "labels", f"GPU {device}"),
        meta("process_sort_index", device, 0, "sort_index", 16_777_216 + device),
        meta("thread_name", pid, pid, "name", f"thread {pid} (pt_main_thread)"),
        meta("thread_name", pid, pid + 37, "name", f"thread {pid + 37} (pt_autograd_0)"),
    ]
    events += [meta("thread_name", device, s, "name", f"stream {s} ") for s in streams]
    events += [
        {"ph": "X", "cat": "Trace", "ts": t0, "dur": t1 - t0, "pid": "Spans", "tid": "PyTorch Profiler",
         "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
        {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
         "tid": "Trace PyTorch Profiler", "ts": t0},
        {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": t1},
    ]
    return events


def document(rank: int, world: int, hw: Hardware, topology: Topology,
             events: list[dict[str, object]]) -> dict[str, object]:
    """The whole trace object of one rank."""
    groups = topology.groups_of(rank)
    return {
        "schemaVersion": 1,
        "deviceProperties": _device_properties(hw),
        "distributedInfo": {
            "backend": "nccl", "rank": rank, "world_size": world, "pg_count": len(groups),
            "pg_config": [{"pg_name": g.name, "pg_desc": g.desc, "backend_config": "cuda:nccl",
                           "pg_size": len(g.ranks), "ranks": list(g.ranks)} for g in groups],
            "nccl_version": "2.21.5",
        },
        "record_shapes": 1,
        "cuda_runtime_version": 12040,
        "cuda_driver_version": 12040,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": BASE_TIME_NS,
        "traceEvents": events,
        "traceName": f"/tmp/libkineto_activities_{pid_of(rank)}.json",
    }
