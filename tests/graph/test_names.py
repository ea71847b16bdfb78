from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bottleneck_oracle.graph.names import (
    KERNEL_NAME_MAX,
    classify_names,
    collective_type,
    is_comm_kernel,
    readable_kernel_name,
    step_number,
)
from bottleneck_oracle.graph.types import Role


@pytest.mark.parametrize("name,kind", [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "allreduce"),
    ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "sendrecv"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)", "allgather"),
    ("gloo:all_reduce", "allreduce"),
    ("gloo:broadcast", "broadcast"),
    ("c10d::allreduce_", "allreduce"),
    ("c10d::_allgather_base_", "allgather"),
    ("c10d::alltoall_base_", "sendrecv"),
    ("aten::mm", ""),
])
def test_collective_type(name: str, kind: str) -> None:
    assert collective_type(name) == kind


def test_step_number_and_comm_kernels() -> None:
    assert step_number("ProfilerStep#551") == 551 and step_number("ProfilerStep") is None
    assert is_comm_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)")
    # the CPU-side annotation matches too: the builder tells them apart by event kind
    assert is_comm_kernel("nccl:all_reduce")
    assert not is_comm_kernel("volta_sgemm_128x32_nt")


def test_classify_names_roles() -> None:
    names = ("cudaLaunchKernel", "cudaStreamSynchronize", "hipDeviceSynchronize", "cudaStreamWaitEvent",
             "cudaEventQuery", "cudaMemcpyAsync", "ProfilerStep#3", "c10d::allreduce_",
             "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "checkpoint_save", "aten::mm",
             "gloo:all_reduce", "enumerate(DataPipe)#ShufflerIterDataPipe")
    role, kernel, gloo = classify_names(names)
    assert role.tolist() == [Role.LAUNCH, Role.SYNC, Role.SYNC, Role.STREAM_WAIT, Role.EVENT_QUERY, Role.COPY,
                             Role.STEP, Role.COLLECTIVE_CALL, Role.DATALOADER, Role.CHECKPOINT, Role.OTHER,
                             Role.OTHER, Role.DATALOADER]
    assert gloo.tolist() == [False] * 11 + [True, False]
    assert not kernel.any()


# --- readable kernel names, on the kernels of the public traces ----------------------------------------
_WILD = Path("/work/shared/traces/wild")


def _wild_kernel_names() -> set[str]:
    names: set[str] = set()
    for path in sorted(_WILD.glob("**/trace.json.gz")):
        doc = json.loads(gzip.open(path).read())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        names |= {e["name"] for e in events if e.get("cat") == "kernel"}
    return names


@pytest.mark.parametrize(("start", "readable"), [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_", "sm90 gemm bf16 128x128x64"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64",
     "cutlass 80 tensorop bf16 s16816gemm relu bf16 64x64 64x6 tn"),
    ("void pytorch_flash::flash_fwd_kernel<", "flash_fwd"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>",
     "vectorized_elementwise_kernel (add)"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps", "reduce_kernel (mean)"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>",
     "vectorized_elementwise_kernel (fill)"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<", "cudnn nchwToNhwcKernel"),
    ("triton_poi_fused__unsafe_view_add_3", "triton_poi_fused__unsafe_view_add_3"),
    ("Cijk_Ailk_Bjlk_BBS_BH_Bias_HAS_SAV_UserArgs_MT128x64x32_", "tensile Cijk_Ailk_Bjlk_BBS_BH MT128x64x32 MI32x32x1"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float", "vectorized_layer_norm_kernel"),
    ("void cublasLt::splitKreduce_kernel<", "cublasLt splitKreduce_kernel"),
])
def test_readable_kernel_name_of_real_kernels(start: str, readable: str) -> None:
    name = next(n for n in sorted(_wild_kernel_names()) if n.startswith(start))
    assert readable_kernel_name(name) == readable


@pytest.mark.parametrize(("name", "readable"), [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "nccl AllReduce Sum bf16 RING LL"),
    ("ampere_sgemm_128x64_tn", "ampere sgemm 128x64 tn"),
    ("void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, float const*, int)",
     "cudnn dgrad_engine"),
    ("void cudnn::detail::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, float*)",
     "cudnn wgrad_alg0_engine"),
    ("", ""), ("x" * 80, "x" * 60),
])
def test_readable_kernel_name_of_other_families(name: str, readable: str) -> None:
    assert readable_kernel_name(name) == (readable or "kernel")


def test_every_real_kernel_name_is_short_readable_and_mostly_distinct() -> None:
    names = _wild_kernel_names()
    short = {n: readable_kernel_name(n) for n in names}
    assert len(names) > 150
    for full, s in short.items():
        assert s and len(s) <= KERNEL_NAME_MAX and "<" not in s, (full, s)
        assert "(" not in s or s.endswith(")") and s.count("(") == 1, (full, s)
    collisions = 1 - len(set(short.values())) / len(names)
    assert collisions < 0.3, f"{collisions:.1%} of distinct kernel names share a readable name"
