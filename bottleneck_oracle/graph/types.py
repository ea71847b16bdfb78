"""Closed vocabularies of the execution graph, shared by findings, the generator, evals and the agent."""

from __future__ import annotations

from enum import IntEnum, StrEnum

from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["NodeKind", "EdgeType", "Role", "Category", "CATEGORIES", "Bottleneck"]


class NodeKind(IntEnum):
    """What a node of the ExecGraph is; stored as int8."""

    CPU_OP = 0
    ANNOTATION = 1  # record_function ranges and ProfilerStep#N
    PYTHON = 2
    RUNTIME = 3  # CUDA/HIP runtime or driver call
    KERNEL = 4
    MEMCPY = 5
    MEMSET = 6
    COMM = 7  # communication work: NCCL/RCCL kernels, gloo:* ops on gloo threads


class EdgeType(IntEnum):
    """Typed edges of the ExecGraph; stored as int8."""

    NEST = 0  # parent op → child op on one thread
    THREAD_NEXT = 1  # op → next sibling on the same thread (program order)
    LAUNCH = 2  # runtime call → GPU work it launched; c10d op → its gloo op
    STREAM_NEXT = 3  # GPU work → next GPU work on the same stream
    SYNC = 4  # awaited work → the call or op that waited for it
    COLLECTIVE = 5  # last rank to arrive → each other member of one collective instance
    DATALOAD = 6  # DataLoader fetch → the op that consumes the batch
    FWDBWD = 7  # forward op → its autograd backward op (fwdbwd flow)
    DATA = 8  # tensor producer → consumer (PyTorch execution trace)


class Role(IntEnum):
    """What a node does beyond its kind, decided from its name; stored as int8."""

    OTHER = 0
    LAUNCH = 1  # launches GPU work (kernel, copy, memset, graph)
    SYNC = 2  # blocks the CPU until GPU work completes
    EVENT_RECORD = 3
    STREAM_WAIT = 4  # cudaStreamWaitEvent: makes a stream wait, does not block the CPU
    EVENT_QUERY = 5  # polls an event: does not block
    STEP = 6  # ProfilerStep#N
    DATALOADER = 7  # DataLoader fetch
    CHECKPOINT = 8  # checkpoint save/load annotation
    COLLECTIVE_CALL = 9  # c10d:: op that enqueues a collective
    COPY = 10  # memcpy call: blocking when its copy ends before the call returns


class Category(StrEnum):
    """Where a step's wall time went; the categories sum to the wall time."""

    GPU_COMPUTE = "gpu_compute"
    COMMUNICATION = "communication"
    CPU = "cpu"
    LAUNCH_OVERHEAD = "launch_overhead"
    SYNC_WAIT = "sync_wait"
    DATA_LOADING = "data_loading"
    IDLE = "idle"


CATEGORIES: tuple[Category, ...] = tuple(Category)  # array code = index here
