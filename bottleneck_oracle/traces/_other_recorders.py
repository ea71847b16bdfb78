"""What other recorders call things, read as the Kineto of today: ROCm's copy and fill kernels, the GPU
rows and step ranges of PyTorch 1.8-1.9."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.traces._validate import to_int
from bottleneck_oracle.traces.types import EventKind

__all__ = ["kernel_kind", "lane_id", "recorded_kinds"]

# ROCm 7 records its copies and fills as kernels: by name they are copies and fills for every layer
_ROCM_COPY_KERNELS = ("__amd_rocclr_copyBuffer", "__amd_rocclr_copyImage", "MEMORY_COPY_")
_ROCM_FILL_KERNELS = ("__amd_rocclr_fillBuffer", "__amd_rocclr_fillImage")


def kernel_kind(name: str) -> EventKind:
    """What a kernel event named ``name`` is: a copy, a fill, or a kernel."""
    if name.startswith(_ROCM_COPY_KERNELS):
        return EventKind.MEMCPY
    return EventKind.MEMSET if name.startswith(_ROCM_FILL_KERNELS) else EventKind.KERNEL


def lane_id(text: str) -> int:
    """A pid or tid as an int; PyTorch 1.8-1.9 name GPU rows ``stream 7``."""
    return to_int(text[7:] if text.startswith("stream ") else text)



def recorded_kinds(names: list[str], kinds: list[EventKind]) -> np.ndarray:
    """int8 per event: its kind as today's Kineto would record it. A kernel may be a copy or a fill
    (``kernel_kind``); a step's range is an annotation however it was recorded: PyTorch 1.8-1.9 wrote
    ``ProfilerStep#N`` as an operator, and the time in it that no op covers (the thread waiting on the autograd
    thread or the GPU) is no op's work."""
    by_name = {n: kernel_kind(n) for n in {n for n, k in zip(names, kinds) if k == EventKind.KERNEL}}
    step = EventKind.ANNOTATION
    return np.array([by_name[n] if k == EventKind.KERNEL else step if k == EventKind.CPU_OP
                     and n.startswith("ProfilerStep#") else k for n, k in zip(names, kinds)], dtype=np.int8)
