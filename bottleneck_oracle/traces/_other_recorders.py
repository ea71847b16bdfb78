"""What other recorders call things, read as the Kineto of today: ROCm's copy and fill kernels, the GPU
rows of PyTorch 1.8-1.9."""

from __future__ import annotations

from bottleneck_oracle.traces._validate import to_int
from bottleneck_oracle.traces.types import EventKind

__all__ = ["kernel_kind", "lane_id"]

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
