"""What every rank of one job shares: shapes, the ops of each layer, CPU templates and kernel costs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.model import (
    Kernel,
    Op,
    Shard,
    embedding_ops,
    head_ops,
    layer_backward,
    layer_forward,
    layer_params,
    loss_grad_op,
    optimizer_ops,
    roofline_s,
)
from bottleneck_oracle.synth.ops import Template, op_template
from bottleneck_oracle.synth.topology import build_topology
from bottleneck_oracle.vocabulary import KernelClass

__all__ = ["KERNEL_CLASSES", "Job", "Tuning"]

KERNEL_CLASSES = tuple(KernelClass)
_TENSORS_PER_LAYER = 6  # qkv, proj, fc1, fc2 and two norms (Megatron fuses q, k and v)


@dataclass(frozen=True, slots=True)
class Tuning:
    """Speed-ups applied to the ground truth (what-if): transfer or kernel time divided by a factor.

    Attributes:
        collective_speedup: (collective kind, factor) pairs; kinds ``allreduce``,
            ``reducescatter``, ``allgather``, ``sendrecv``.
        kernel_speedup: (kernel class, factor) pairs; classes of ``KernelClass``.
    """

    collective_speedup: tuple[tuple[str, float], ...] = ()
    kernel_speedup: tuple[tuple[str, float], ...] = ()

    def collective(self, kind: str) -> float:
        """Speed-up of one collective kind (1 when untouched)."""
        return dict(self.collective_speedup).get(kind, 1.0)

    def kernel(self, kernel_class: str) -> float:
        """Speed-up of one kernel class (1 when untouched)."""
        return dict(self.kernel_speedup).get(kernel_class, 1.0)


class Job:
    """Per-job tables the rank builders share; templates and kernels are interned on first use.

    Args:
        config: the job.
        tuning: what-if speed-ups.
    """

    def __init__(self, config: SynthConfig, tuning: Tuning) -> None:
        self.config = config
        self.tuning = tuning
        self.spec = config.model_spec
        self.hw = config.hardware_spec
        self.topology = build_topology(config)
        self.shard = Shard(config.batch, self.spec.seq_len, config.tp)
        arch = self.hw.arch
        self.layer_fwd = layer_forward(self.spec, self.shard, arch)
        self.layer_bwd = layer_backward(self.spec, self.shard, arch)
        self.embed_fwd, self.embed_bwd, self.embed_params = embedding_ops(self.spec, self.shard)
        self.head_fwd, self.head_bwd, self.head_params = head_ops(self.spec, self.shard, arch)
        self.loss_grad = loss_grad_op()
        self.layer_params = layer_params(self.spec, config.tp)
        self.layers_per_chunk = self.spec.layers // (config.pp * config.virtual_stages)
        self.activation_nelems = self.shard.tokens * self.spec.d_model
        self.latency_ns = round(self.hw.launch_latency_s * 1e9)
        self.templates: list[Template] = []
        self.kernels: list[Kernel] = []
        self.kernel_ns: list[float] = []
        self._templates: dict[object, int] = {}
        self._kernels: dict[int, int] = {}  # by id(): every kernel lives in the op tables above
        self.optimizer_ops = tuple(self._optimizer_ops(stage) for stage in range(config.pp))

    def template(self, key: object, make: Callable[[], Template]) -> int:
        """Index of the template cached under ``key``, made on first use."""
        index = self._templates.get(key)
        if index is None:
            index = self._templates[key] = len(self.templates)
            self.templates.append(make())
        return index

    def op(self, op: Op, backward: bool) -> int:
        """Template index of a compute op."""
        return self.template(("op", id(op), backward), lambda: op_template(op, self.hw, backward))

    def kernel(self, kernel: Kernel) -> int:
        """Index of a kernel; its base time is the roofline time divided by any what-if speed-up."""
        index = self._kernels.get(id(kernel))
        if index is None:
            index = self._kernels[id(kernel)] = len(self.kernels)
            self.kernels.append(kernel)
            seconds = roofline_s(kernel.flops, kernel.nbytes, self.hw, self.config.compute_efficiency)
            self.kernel_ns.append(seconds * 1e9 / self.tuning.kernel(kernel.kernel_class))
        return index

    def chunk_params(self, stage: int, chunk: int) -> int:
        """Parameters one rank holds for one model chunk (embedding on the first, head on the last)."""
        params = self.layers_per_chunk * self.layer_params
        if stage == 0 and chunk == 0:
            params += self.embed_params
        if stage == self.config.pp - 1 and chunk == self.config.virtual_stages - 1:
            params += self.head_params
        return params

    def _optimizer_ops(self, stage: int) -> tuple[tuple[str, Kernel, int], ...]:
        """AdamW's foreach ops on one stage's parameters (1/dp of them with a distributed optimizer)."""
        v = self.config.virtual_stages
        params = sum(self.chunk_params(stage, c) for c in range(v))
        if self.config.distributed_optimizer:
            params = -(-params // self.config.dp)
        return optimizer_ops(params, v * self.layers_per_chunk * _TENSORS_PER_LAYER + 2)
