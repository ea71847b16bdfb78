"""The shared vocabulary of DESIGN: bottleneck categories and kernel classes, used by every layer."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Bottleneck", "KernelClass"]


class Bottleneck(StrEnum):
    """What makes a step slow; ``none`` when the step is not anomalous."""

    DATALOADER_STALL = "dataloader_stall"
    STRAGGLER_RANK = "straggler_rank"
    HOST_PAUSE = "host_pause"
    EXPOSED_COMMUNICATION = "exposed_communication"
    SLOW_COMPUTE = "slow_compute"
    HOST_SYNC = "host_sync"
    LAUNCH_OVERHEAD = "launch_overhead"
    PIPELINE_BUBBLE = "pipeline_bubble"
    CHECKPOINT_STALL = "checkpoint_stall"
    NONE = "none"


class KernelClass(StrEnum):
    """What a compute kernel is: the simulator's roofline costs and the what-if edits' targets."""

    GEMM = "gemm"
    ATTENTION = "attention"
    ELEMENTWISE = "elementwise"
    OPTIMIZER = "optimizer"
