"""What an event's name says it does: runtime roles, steps, data loading, checkpoints, collectives.

Names are classified once per distinct string, never per event.
"""

from __future__ import annotations

import re

import numpy as np

from bottleneck_oracle.graph.types import Role

__all__ = ["COMM_LIBRARIES", "KERNEL_NAME_MAX", "classify_names", "collective_type", "comm_library", "p2p_direction",
           "readable_kernel_name", "step_number",
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


# --- kernel names as engineers read them -------------------------------------------------------------
KERNEL_NAME_MAX = 60  # characters of a readable kernel name
_NCCL_KERNEL = re.compile(r"(nccl|rccl)(?:Dev)?Kernel_(\w+)")
_XMMA = re.compile(r"^(sm\d+)_xmma_(\w+?)_([a-z]+\d+)[a-z0-9]*_\w*?tilesize(\d+x\d+x\d+)")
_ARCH_GEMM = re.compile(r"^(?:ampere|volta|turing|maxwell|hopper|sm\d+)_\w*gemm")
_TENSILE = re.compile(r"^Cijk_(\w+?)_(?:Bias|HAS?|SAV|UserArgs)_.*?(MT\d+x\d+x\d+)_(MI\d+x\d+x\d+)?")
_GENERIC_LAST = frozenset({"kernel", "Kernel", "Kernel2", "device_kernel"})
_ELEMENTWISE = re.compile(r"\w*(elementwise|reduce)\w*kernel\w*")
_SELF_FUNCTOR = re.compile(r"Functor(?:OnSelf|OnOther)?_(\w+?)<")
_NAMED = re.compile(r"(\w+?)(?:Functor|Ops)<|(\w+?)_functor<")
_WRAPPERS = frozenset({"Binary", "AUnary", "BUnary", "Unary", "Reduce", "func_wrapper_t"})
_FUNCTION = re.compile(r"::(\w+)(?:<[^()]*>)?\(")
_NOT_OPS = frozenset({"operator", "gpu_kernel_impl", "gpu_kernel_impl_nocast", "gpu_index_kernel"})
_OP_SUFFIX = re.compile(
    r"(Internal|_cuda_kernel|_kernel_cuda|_kernel_impl|_kernel|CUDAKernelImpl|KernelImpl|_cuda|_impl)+$")


def _depth0(text: str, stop: str) -> int:
    """Index of the first ``stop`` character outside every ``<...>`` and ``(...)`` (len(text) if none)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == stop and depth == 0:
            return i
        depth += (ch in "<(") - (ch in ">)")
    return len(text)


def _without_templates(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">" and depth > 0
    return "".join(out)


def _snake(word: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", word).lower()


def _clip(words: str) -> str:
    """At most ``KERNEL_NAME_MAX`` characters, cut at a word or ``_`` boundary where one is near."""
    if len(words) <= KERNEL_NAME_MAX:
        return words
    cut = max(words.rfind(" ", 0, KERNEL_NAME_MAX + 1), words.rfind("_", 0, KERNEL_NAME_MAX + 1))
    return words[:cut if cut > KERNEL_NAME_MAX // 2 else KERNEL_NAME_MAX].rstrip(" _")


def _identifier(name: str) -> str:
    """Readable form of a plain identifier kernel name (no C++ scope)."""
    if m := _XMMA.match(name):
        arch, op, dtype, tile = m.groups()
        half = len(dtype) // 2
        dtype = dtype[:half] if dtype[:half] == dtype[half:] else dtype
        return f"{arch} {op.replace('_', ' ')} {dtype} {tile}"
    if m := _TENSILE.match(name):
        return " ".join(g for g in ("tensile Cijk_" + m.group(1), m.group(2), m.group(3)) if g)
    if _ARCH_GEMM.match(name) or name.startswith("cutlass_"):
        return _clip(" ".join(w for w in name.split("_") if w and w != "optimized" and not w.startswith("align")))
    return _clip(name)


def _op_of(args: str) -> str:
    """The informative part of a PyTorch elementwise/reduce kernel's template arguments: its functor's
    or the op function's name (``CUDAFunctor_add`` → add, ``MulFunctor`` → mul, ``silu_kernel`` → silu)."""
    if m := _SELF_FUNCTOR.search(args):
        return m.group(1)
    named = [n for a, b in _NAMED.findall(args) if (n := a or b) and n.split("_")[-1] not in _WRAPPERS
             and n not in _WRAPPERS and not n.startswith("CUDA")]
    if named:
        return _OP_SUFFIX.sub("", _snake(named[-1]))
    for m in _FUNCTION.finditer(args):
        if m.group(1) not in _NOT_OPS:
            return _OP_SUFFIX.sub("", m.group(1)) or m.group(1)
    return ""


def _scoped(name: str) -> str:
    """Readable form of a demangled C++ signature: return type, namespaces, templates and arguments gone."""
    text = name.replace("(anonymous namespace)::", "")
    head = text[:_depth0(text, "(")]
    open_at = _depth0(head, "<")
    args = head[open_at + 1:head.rfind(">")] if open_at < len(head) else ""
    qualified = _without_templates(head).split()[-1] if _without_templates(head).split() else head
    parts = [p for p in qualified.split("::") if p]
    base = parts[-1] if parts else qualified
    if base in _GENERIC_LAST and re.fullmatch(r"\w+", args.strip()):
        base = _identifier(args.strip())
    elif base in _GENERIC_LAST and len(parts) > 1:
        base = f"{parts[-2]} {base}"
    if base.startswith("flash_"):
        base = base.removesuffix("_kernel")
    if _ELEMENTWISE.fullmatch(base):
        if op := _op_of(args):
            op = op[:max(KERNEL_NAME_MAX - len(base) - 3, 8)]
            return f"{base} ({op})"[:KERNEL_NAME_MAX] if len(base) < KERNEL_NAME_MAX - 10 else _clip(base)
    library = next((lib for lib in ("cudnn", "cublasLt", "cublas") if parts and lib in parts[0]), "")
    return _clip(f"{library} {base}".strip())


def readable_kernel_name(name: str) -> str:
    """A GPU kernel's name the way engineers read it: ``void``, return types, namespaces, template
    arguments and argument lists gone, the informative tokens of well-known families kept
    (``cudnn dgrad_engine``, ``sm90 gemm bf16 128x128x64``, ``ampere sgemm 128x64 tn``, ``flash_fwd``,
    ``nccl AllReduce Sum bf16 RING LL``, ``vectorized_elementwise_kernel (add)``); at most
    ``KERNEL_NAME_MAX`` characters, never empty (the name's first characters when nothing is left)."""
    text = name.strip().removeprefix("void ").strip()
    if m := _NCCL_KERNEL.search(text):
        out = f"{m.group(1)} {m.group(2).replace('_', ' ')}"
    elif re.fullmatch(r"[\w.$]+", text):
        out = _identifier(text)
    else:
        out = _scoped(text)
    out = _clip(re.sub(r"[<>]", "", out).strip())
    return out or name.strip()[:KERNEL_NAME_MAX] or "kernel"
