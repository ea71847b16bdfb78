"""Closed vocabularies of the trace layer and the units its columns use.

Times are integer nanoseconds (``_ns``) relative to the trace origin; ids that
the profiler writes (correlation, External id) are int64 with -1 for "none".
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["EventKind", "SyncKind", "NONE", "GPU_KINDS", "CPU_KINDS"]

NONE = -1  # the "absent" value of every integer id column


class EventKind(IntEnum):
    """What a trace event is, from its Kineto ``cat``; stored as int8."""

    CPU_OP = 0  # cpu_op: an ATen / c10d operator
    ANNOTATION = 1  # user_annotation: record_function ranges, ProfilerStep#N, gloo:*
    PYTHON = 2  # python_function (with_stack=True)
    RUNTIME = 3  # cuda_runtime / cuda_driver calls (HIP too)
    KERNEL = 4  # GPU kernel
    MEMCPY = 5  # gpu_memcpy
    MEMSET = 6  # gpu_memset
    SYNC = 7  # cuda_sync: the GPU-side record of a synchronisation
    GPU_ANNOTATION = 8  # gpu_user_annotation: a label on a GPU row, not work


CPU_KINDS = (EventKind.CPU_OP, EventKind.ANNOTATION, EventKind.PYTHON, EventKind.RUNTIME)
GPU_KINDS = (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)


class SyncKind(IntEnum):
    """The ``cuda_sync_kind`` of a sync event; stored as int8."""

    NONE = 0
    CONTEXT = 1  # cudaDeviceSynchronize: waits for every stream of the device
    STREAM = 2  # cudaStreamSynchronize: waits for one stream
    EVENT = 3  # cudaEventSynchronize / cudaEventQuery: waits for a recorded event
    STREAM_WAIT = 4  # cudaStreamWaitEvent: a stream waits for another (GPU to GPU)
