"""Named GPUs and what moving bytes between them costs: ring collectives and point-to-point sends.

Bandwidths are the achievable (bus) bandwidth per GPU in one direction, not the marketing
aggregate: NVLink inside a node of `GPUS_PER_NODE` GPUs, the network card across nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GPUS_PER_NODE", "HARDWARE", "Hardware", "collective_time_s", "same_node"]

GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class Hardware:
    """One GPU model and the node it sits in.

    Attributes:
        name: the device name Kineto writes in ``deviceProperties``.
        peak_flops: dense bf16 tensor-core FLOP/s.
        hbm_bytes_per_s: HBM bandwidth.
        nvlink_bytes_per_s: NVLink bandwidth per GPU and direction, as NCCL reaches it.
        net_bytes_per_s: inter-node bandwidth per GPU (one NIC per GPU).
        nvlink_latency_s, net_latency_s: latency of one ring step (alpha).
        pcie_bytes_per_s: host↔device copies of pinned memory.
        disk_bytes_per_s: the node's checkpoint storage.
        launch_latency_s: from the end of a launch call to the earliest kernel start.
        launch_cpu_s: CPU time of one ``cudaLaunchKernel`` call.
        min_kernel_s: the shortest kernel the GPU runs.
        efficiency: share of `peak_flops` a large GEMM reaches (default compute efficiency).
        compute_capability, sms, memory_bytes: for ``deviceProperties``.
    """

    name: str
    peak_flops: float
    hbm_bytes_per_s: float
    nvlink_bytes_per_s: float
    net_bytes_per_s: float
    nvlink_latency_s: float
    net_latency_s: float
    pcie_bytes_per_s: float
    disk_bytes_per_s: float
    launch_latency_s: float
    launch_cpu_s: float
    min_kernel_s: float
    efficiency: float
    compute_capability: tuple[int, int]
    sms: int
    memory_bytes: int

    @property
    def arch(self) -> str:
        """``sm80`` or ``sm90``: picks kernel names."""
        return f"sm{self.compute_capability[0]}{self.compute_capability[1]}"


HARDWARE: dict[str, Hardware] = {
    "A100": Hardware(
        name="NVIDIA A100-SXM4-80GB", peak_flops=312e12, hbm_bytes_per_s=2.039e12,
        nvlink_bytes_per_s=230e9, net_bytes_per_s=23e9, nvlink_latency_s=6e-6, net_latency_s=12e-6,
        pcie_bytes_per_s=24e9, disk_bytes_per_s=2e9, launch_latency_s=4e-6, launch_cpu_s=5e-6,
        min_kernel_s=2.5e-6, efficiency=0.6, compute_capability=(8, 0), sms=108, memory_bytes=85_899_345_920,
    ),
    "H100": Hardware(
        name="NVIDIA H100 80GB HBM3", peak_flops=989e12, hbm_bytes_per_s=3.35e12,
        nvlink_bytes_per_s=360e9, net_bytes_per_s=45e9, nvlink_latency_s=5e-6, net_latency_s=10e-6,
        pcie_bytes_per_s=48e9, disk_bytes_per_s=2e9, launch_latency_s=3e-6, launch_cpu_s=4e-6,
        min_kernel_s=2e-6, efficiency=0.5, compute_capability=(9, 0), sms=132, memory_bytes=85_520_809_984,
    ),
    "H200": Hardware(
        name="NVIDIA H200", peak_flops=989e12, hbm_bytes_per_s=4.8e12,
        nvlink_bytes_per_s=360e9, net_bytes_per_s=45e9, nvlink_latency_s=5e-6, net_latency_s=10e-6,
        pcie_bytes_per_s=48e9, disk_bytes_per_s=2e9, launch_latency_s=3e-6, launch_cpu_s=4e-6,
        min_kernel_s=2e-6, efficiency=0.55, compute_capability=(9, 0), sms=132, memory_bytes=150_754_820_096,
    ),
}


def same_node(ranks: tuple[int, ...]) -> bool:
    """True when every rank sits on one node (ranks r and r' share a node iff r // 8 == r' // 8)."""
    return len({r // GPUS_PER_NODE for r in ranks}) <= 1


def collective_time_s(kind: str, nbytes: float, ranks: tuple[int, ...], hw: Hardware) -> float:
    """Transfer time of one collective among ``ranks`` once all of them have arrived.

    Ring algorithms over n ranks with bandwidth bw and per-step latency a (NVLink inside
    a node, the network otherwise):

    - ``allreduce``: 2(n-1)/n · bytes / bw + 2(n-1) · a
    - ``reducescatter`` / ``allgather``: (n-1)/n · bytes / bw + (n-1) · a
      (bytes of the whole, unsharded buffer)
    - ``sendrecv``: bytes / bw + a

    Args:
        kind: ``allreduce``, ``reducescatter``, ``allgather`` or ``sendrecv``.
        nbytes: message size in bytes.
        ranks: global ranks of the group.
        hw: the hardware.

    Returns:
        Seconds; 0 for a group of one rank.

    Raises:
        ValueError: an unknown collective kind.
    """
    n = len(ranks)
    if n <= 1:
        return 0.0
    local = same_node(ranks)
    bw = hw.nvlink_bytes_per_s if local else hw.net_bytes_per_s
    alpha = hw.nvlink_latency_s if local else hw.net_latency_s
    if kind == "allreduce":
        return 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * alpha
    if kind in ("reducescatter", "allgather"):
        return (n - 1) / n * nbytes / bw + (n - 1) * alpha
    if kind == "sendrecv":
        return nbytes / bw + alpha
    raise ValueError(f"collective kind {kind!r}: use allreduce, reducescatter, allgather or sendrecv")
