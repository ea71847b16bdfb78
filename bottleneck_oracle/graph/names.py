"""What an event's name says it does: runtime roles, steps, data loading, checkpoints, collectives.

Names are classified once per distinct string, never per event.
"""

from __future__ import annotations

import re

import numpy as np

from bottleneck_oracle.graph.types import Role

__all__ = ["COMM_LIBRARIES", "classify_names", "collective_type", "comm_library", "p2p_direction", "step_number",
           "is_comm_kernel"]

_LAUNCH = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel", "cudaGraphLaunch", "cuGraphLaunch",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipGraphLaunch",
    "hipExtLaunchKernel", "hipLaunchCooperativeKernel", "cuLaunchCooperativeKernel",
    "cudaMemsetAsync", "cudaMemset", "hipMemsetAsync", "hipMemset",
})
_SYNC = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipCtxSynchronize",
    # synchronous copies: they return once the copy and the work before it are done (on MI300 the copy can
    # seem to end a µs after the call returns: clocks skewed by more than the copy takes)
    "cudaMemcpy", "hipMemcpy", "hipMemcpyWithStream",
})
_RECORD = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "hipEventRecord"})
_WAIT = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent"})
_QUERY = frozenset({"cudaEventQuery", "cudaStreamQuery", "hipEventQuery", "hipStreamQuery"})
_COPY = re.compile(r"^(cuda|hip|cu)Memcpy")
_STEP = re.compile(r"^ProfilerStep#(\d{1,9})$")  # a step number fits the int32 step columns
_DATALOADER = re.compile(r"DataLoader.*__next__|^enumerate\(DataPipe\)|(?i:load_batch|wait_for_batch|dataloader)")
_CHECKPOINT = re.compile(
    r"(?i)(save|load|async)[_ ]?checkpoint|checkpoint[_ ]?(save|load|write)|torch\.(save|load)\b|"
    r"serialization\.py"
)
# Communication kernels, whoever wrote them: the one table every layer reads (the breakdown, the GPU
# timeline, findings, what-if selectors, the graph model's node types). (library, name pattern,
# collective its kernels run when the name does not say: "" for none). gloo runs on CPU threads as
# ``gloo:*`` ops (``classify_names``). Kernel names may carry a ``void `` prefix and template arguments.
COMM_LIBRARIES: tuple[tuple[str, str, str], ...] = (
    ("NCCL", r"^(void )?nccl|ncclKernel|ncclDevKernel", ""),
    ("RCCL", r"^(void )?rccl|rcclGenericKernel", ""),
    ("HCCL", r"^(void )?hccl", ""),
    ("DeepEP", r"dpsk::ep::|deep_ep\b|deep_ep::", "alltoall"),  # MoE dispatch / combine: an all-to-all
    ("NVSHMEM", r"(?i:nvshmem)", ""),
    ("MSCCL++", r"(?i:mscclpp)", ""),
    ("custom all-reduce", r"cross_device_reduce|(?i:(one|two)_?shot_?all_?reduce)", "allreduce"),  # vLLM, SGLang, TRT-LLM
    ("Transformer Engine userbuffers", r"(?i:userbuffers)", ""),
)
_COMM_KERNEL = re.compile("|".join(f"(?:{p})" for _, p, _ in COMM_LIBRARIES))
_NCCL_TYPE = re.compile(r"ncclKernel_([A-Za-z]+)|ncclDevKernel_([A-Za-z]+)|^(?:nccl|rccl)(?!Generic)([A-Z][A-Za-z]+)")
_NAMED_TYPE = re.compile(r"(?i)all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast")


def step_number(name: str) -> int | None:
    """``ProfilerStep#12`` → 12; None for other names."""
    m = _STEP.match(name)
    return int(m.group(1)) if m else None


def is_comm_kernel(name: str) -> bool:
    """True for the kernels of every library of ``COMM_LIBRARIES``."""
    return bool(_COMM_KERNEL.search(name))


def comm_library(name: str) -> str:
    """The ``COMM_LIBRARIES`` library of a communication kernel, ``""`` for other names."""
    return next((lib for lib, pattern, _ in COMM_LIBRARIES if re.search(pattern, name)), "")


def collective_type(name: str) -> str:
    """Normalized collective of a comm op: ``allreduce``, ``sendrecv``, ``broadcast``... or ``""``.

    Works on NCCL kernels (``ncclKernel_AllReduce_RING_LL_Sum_float``,
    ``ncclDevKernel_SendRecv``), gloo ops (``gloo:all_reduce``) and c10d ops
    (``c10d::allreduce_``, ``c10d::_allgather_base_``).
    """
    if name.startswith("gloo:"):
        base = name[5:]
    elif name.startswith("c10d::"):
        base = name[6:]
    elif name.startswith("nccl:"):
        base = name[5:]
    elif m := _NCCL_TYPE.search(name):
        base = next(g for g in m.groups() if g)
    elif lib := comm_library(name):
        named = _NAMED_TYPE.search(name)
        # DeepEP's dispatch and combine are its all-to-all; other libraries say it in the name or not at all
        base = next(c for l, _, c in COMM_LIBRARIES if l == lib) or (named.group(0) if named else "")
        return base.lower().replace("_", "")
    else:
        return ""
    base = base.lower().replace("_base", "").replace("_", "")
    return "sendrecv" if base in ("alltoall", "send", "recv", "alltoallv") else base


def p2p_direction(name: str) -> str:
    """``send`` or ``recv`` for point-to-point c10d and gloo ops (``c10d::recv_``, ``gloo:send``), else ``""``."""
    base = name[6:] if name.startswith("c10d::") else name[5:] if name.startswith("gloo:") else ""
    base = base.rstrip("_")
    return base if base in ("send", "recv") else ""


def _role(name: str) -> Role:
    if name in _LAUNCH:
        return Role.LAUNCH
    if name in _SYNC:
        return Role.SYNC
    if name in _RECORD:
        return Role.EVENT_RECORD
    if name in _WAIT:
        return Role.STREAM_WAIT
    if name in _QUERY:
        return Role.EVENT_QUERY
    if _COPY.match(name):
        return Role.COPY
    if _STEP.match(name):
        return Role.STEP
    if name.startswith("c10d::"):
        return Role.COLLECTIVE_CALL
    if _DATALOADER.search(name):
        return Role.DATALOADER
    if _CHECKPOINT.search(name):
        return Role.CHECKPOINT
    return Role.OTHER


def classify_names(strings: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Role, comm-kernel-ness and gloo-op-ness of every interned string.

    Returns:
        ``(role int8[S], comm_kernel bool[S], gloo_op bool[S])`` indexed by string id.
    """
    role = np.array([_role(s) for s in strings], dtype=np.int8)
    kernel = np.array([is_comm_kernel(s) for s in strings], dtype=bool)
    gloo = np.array([s.startswith("gloo:") for s in strings], dtype=bool)
    return role, kernel, gloo
