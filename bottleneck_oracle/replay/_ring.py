"""Ring collectives for ``structural.data_parallel``: their cost fitted on a trace, the links a ring
takes on the side of a node's edge the trace does not show (tables of typical numbers by GPU model),
and where the ranks of the traced job and of the job at another data-parallel degree sit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.errors import ConfigError

__all__ = ["GPUS_PER_NODE", "Layout", "Network", "RingFit", "describe_fit", "fit_ring", "network_of", "nodes_spanned",
           "nvlink_of", "read_layout"]

GPUS_PER_NODE = 8  # DGX/HGX nodes; ranks fill nodes in order (rank r on node r // 8), as torchrun places them
_MIN_SPREAD = 1.05  # largest over smallest message: below it a latency/bandwidth split is noise
# Inter-node network per GPU, as NCCL reaches it across nodes (bus bandwidth of nccl-tests
# all_reduce_perf on DGX/HGX clusters): one 200 Gb/s HDR InfiniBand NIC (ConnectX-6) per A100
# reaches about 23 GB/s, one 400 Gb/s NDR NIC (ConnectX-7) per H100, H200 or B200 about 45 GB/s;
# a ring step across nodes costs about 10-12 µs (NIC, switch, NCCL's proxy thread).
# (GPU-name fragment, GB/s per GPU, µs per ring step, the NIC)
_NETWORKS = (
    ("H200", 45.0, 10.0, "400 Gb/s NDR"),
    ("H100", 45.0, 10.0, "400 Gb/s NDR"),
    ("B200", 45.0, 10.0, "400 Gb/s NDR"),
    ("A100", 23.0, 12.0, "200 Gb/s HDR"),
)
_TYPICAL_LATENCY_US = 10.0  # with a given bandwidth but no latency for an unknown GPU
# Inside one DGX/HGX node (NVSwitch), for a trace whose groups span nodes and a job that fits in
# one: nccl-tests all_reduce_perf reaches about 230 GB/s of bus bandwidth on 8 A100s (NVLink 3,
# 300 GB/s a direction) and about 360 GB/s on 8 H100s or H200s (NVLink 4, 450 GB/s a direction,
# ring algorithm), with 5-6 µs a ring step. (GPU-name fragment, GB/s per GPU, µs per ring step, the link)
_NVLINKS = (
    ("H200", 360.0, 5.0, "NVLink 4"),
    ("H100", 360.0, 5.0, "NVLink 4"),
    ("A100", 230.0, 6.0, "NVLink 3"),
)


def ring_terms(kind: str, n: int) -> tuple[float, float]:
    """(latency steps, share of the bytes each rank moves) of a ring over ``n`` ranks (a send: one of each)."""
    if kind == "sendrecv":
        return 1.0, 1.0
    if n <= 1:
        return 0.0, 0.0
    if kind == "allreduce":  # reduce-scatter then all-gather: 2(n-1) steps of bytes/n
        return 2.0 * (n - 1), 2.0 * (n - 1) / n
    return float(n - 1), (n - 1) / n


@dataclass(frozen=True, slots=True)
class RingFit:
    """t = steps(n)·α + share(n)·bytes/β for one collective kind on a ring of n ranks."""

    kind: str
    alpha_s: float
    beta_bytes_per_s: float
    count: int
    sizes: int

    def time_s(self, nbytes: np.ndarray, n: int) -> np.ndarray:
        steps, share = ring_terms(self.kind, n)
        return steps * self.alpha_s + share * nbytes / self.beta_bytes_per_s


def fit_ring(kind: str, n: int, nbytes: np.ndarray, t_s: np.ndarray) -> RingFit:
    """Least-squares α and β of one kind's ring cost; a pure bandwidth fit with one message size."""
    steps, share = ring_terms(kind, n)
    sizes = len(np.unique(nbytes))
    if nbytes.max() >= _MIN_SPREAD * nbytes.min():
        slope, intercept = np.polyfit(nbytes, t_s, 1)
        if slope > 0 and intercept >= 0:
            return RingFit(kind, intercept / steps, share / slope, len(t_s), sizes)
    # one size (or a fit with a negative term): all of the time is bandwidth, latency 0
    return RingFit(kind, 0.0, share * float(nbytes.sum()) / max(float(t_s.sum()), 1e-12), len(t_s), sizes)


def describe_fit(fit: RingFit, what: str = "") -> str:
    """The fitted ring as a sentence: its formula, α, β and what they were fitted on."""
    formula = {"allreduce": "t = 2(D-1)·α + 2(D-1)/D·bytes/β", "sendrecv": "t = α + bytes/β"}.get(
        fit.kind, "t = (D-1)·α + (D-1)/D·bytes/β")
    name = "send" if fit.kind == "sendrecv" else fit.kind
    how = (f"fitted on {fit.count} {name}s of {fit.sizes} message sizes of this trace" if fit.alpha_s > 0
           else f"one message size in {fit.count} {name}s of this trace: a pure bandwidth ratio, α taken as 0")
    head = "pipeline send" if fit.kind == "sendrecv" else f"ring {fit.kind}"
    return (f"{head}{what}: {formula}, α = {fit.alpha_s * 1e6:.3g} µs, "
            f"β = {fit.beta_bytes_per_s / 1e9:.4g} GB/s, {how}")


@dataclass(frozen=True, slots=True)
class Network:
    """One GPU's link, across nodes or inside one: bus bandwidth, latency of a ring step, where they come from."""

    bytes_per_s: float
    latency_s: float
    source: str

    def fit(self, kind: str) -> RingFit:
        """The ring cost of ``kind`` over this network."""
        return RingFit(kind, self.latency_s, self.bytes_per_s, 0, 0)

    def describe(self, aside: str = "") -> str:
        """The link in words: "45 GB/s per GPU and 10 µs a hop (400 Gb/s NDR per H100, assumed; ``aside``)"."""
        source = f"{self.source}; {aside}" if aside else self.source
        return f"{self.bytes_per_s / 1e9:.4g} GB/s per GPU and {self.latency_s * 1e6:.3g} µs a hop ({source})"


def network_of(devices: Iterable[str], net_gbps: float | None = None,
               net_latency_us: float | None = None) -> Network | None:
    """The network of the GPUs named in a trace (the slowest where they differ), or the one given.

    Args:
        devices: GPU names as Kineto's ``deviceProperties`` records them ("NVIDIA H100 80GB HBM3").
        net_gbps: GB/s per GPU to use instead of the table (bus bandwidth, as nccl-tests reports it).
        net_latency_us: µs per ring step to use instead of the table.

    Returns:
        The network; None when no GPU name is in the table and no bandwidth is given.

    Raises:
        ConfigError: a given number that is not positive.
    """
    for name, value in (("net_gbps", net_gbps), ("net_latency_us", net_latency_us)):
        if value is not None and not value > 0:
            raise ConfigError(f"data_parallel: {name} must be > 0, got {value!r}")
    known = sorted((gbps, us, f"{nic} per {gpu}, assumed") for gpu, gbps, us, nic in _NETWORKS
                   if any(gpu.lower() in d.lower() for d in devices))
    if net_gbps is None and not known:
        return None
    gbps, us, source = known[0] if known else (0.0, _TYPICAL_LATENCY_US, "")
    if net_gbps is not None and net_latency_us is not None:
        gbps, us, source = net_gbps, net_latency_us, "given"
    elif net_gbps is not None:
        gbps, source = net_gbps, f"bandwidth given; latency of {source}" if source else \
            "bandwidth given; a typical latency, assumed"
    elif net_latency_us is not None:
        us, source = net_latency_us, f"latency given; bandwidth of {source}"
    return Network(gbps * 1e9, us * 1e-6, source)


def nvlink_of(devices: Iterable[str]) -> Network | None:
    """The links inside a node of the GPUs named in a trace (the slowest where they differ); None if unknown."""
    known = sorted((gbps, us, f"{link} per {gpu}, assumed") for gpu, gbps, us, link in _NVLINKS
                   if any(gpu.lower() in d.lower() for d in devices))
    return Network(known[0][0] * 1e9, known[0][1] * 1e-6, known[0][2]) if known else None


def nodes_spanned(ranks: Iterable[int]) -> int:
    """How many nodes hold ``ranks``."""
    return len({int(r) // GPUS_PER_NODE for r in ranks})


@dataclass(frozen=True, slots=True)
class Layout:
    """Where ranks sit in the traced job and in the job at another data-parallel degree: Megatron order
    (rank = stage·dp·tp + dp_index·tp + tp_index), so tensor-parallel ranks share a node, and nodes
    of ``GPUS_PER_NODE`` ranks.

    Attributes:
        current, new: data-parallel degree traced and asked for.
        tp: tensor-parallel degree (the stride of a data-parallel group's ranks).
        world: ranks of the traced job.
        megatron: the traced data-parallel groups read as Megatron order; when not, a new group
            is taken to span as many nodes as it can (``new`` ranks over the new job's nodes).
    """

    current: int
    new: int
    tp: int
    world: int
    megatron: bool

    @property
    def new_world(self) -> int:
        """Ranks of the job at the new degree."""
        return self.world // self.current * self.new

    def stands_for(self, rank: int) -> list[int]:
        """The ranks of the new job a traced rank stands for: its stage and tensor index, and the
        data-parallel indices that are its own modulo the traced degree (one, wrapped, when shrinking)."""
        stage, within = divmod(int(rank), self.current * self.tp)
        index, t = divmod(within, self.tp)
        first = stage * self.new * self.tp + t
        if index >= self.new:  # not in the smaller job: it stands for the rank its index wraps to
            return [first + index % self.new * self.tp]
        return [first + i * self.tp for i in range(index, self.new, self.current)]

    def new_link_nodes(self, ranks: Sequence[int]) -> int:
        """The most nodes a pipeline link between ``ranks`` (traced) spans in the new job, over the
        links it stands for (the slowest rank sets the step)."""
        return max(nodes_spanned(pair) for pair in zip(*(self.stands_for(r) for r in ranks)))

    def new_group_nodes(self, ranks: Sequence[int]) -> int:
        """Nodes the data-parallel group holding ``ranks`` (traced; empty where not recorded) spans in the new job."""
        if not self.megatron or not ranks:  # as many as it can: exact for a group that is the whole job
            return min(self.new, -(-self.new_world // GPUS_PER_NODE))
        stage, t = min(ranks) // (self.current * self.tp), min(ranks) % self.tp
        first = stage * self.new * self.tp + t
        return nodes_spanned(range(first, first + self.new * self.tp, self.tp))


def read_layout(groups: Iterable[Sequence[int]], current: int, new: int, world: int) -> Layout:
    """The layout from the traced data-parallel groups' ranks (those the trace records)."""
    known = [sorted(r) for r in groups if len(r) == current]
    if not known:  # no ranks recorded: the data-parallel group is the world, or the layout is unknown
        return Layout(current, new, 1, world, megatron=current == world)
    tp = known[0][1] - known[0][0] if current > 1 else 1
    block = current * tp
    regular = tp >= 1 and world % block == 0 and all(
        r[0] % block < tp and all(b - a == tp for a, b in zip(r, r[1:])) for r in known)
    return Layout(current, new, max(tp, 1), world, megatron=regular)
