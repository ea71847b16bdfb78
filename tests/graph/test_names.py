from __future__ import annotations

import pytest

from bottleneck_oracle.graph.names import classify_names, collective_type, is_comm_kernel, step_number
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
