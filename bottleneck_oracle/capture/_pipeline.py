"""Pipeline parallelism for the capture job: the GPT split into stages, one step run 1F1B over gloo.

Ranks are stages × data-parallel replicas; a replica's stages sit on consecutive ranks, so rank
``r`` is stage ``r % stages`` of replica ``r // stages``. Activations go forward and gradients back
with ``torch.distributed`` send/recv (``c10d::send`` / ``c10d::recv_``; a stage that waits for its
neighbour shows a long ``gloo:recv`` on its main thread). With several replicas each stage
all-reduces its gradients over the ranks holding the same stage before the optimizer runs. Every
micro-batch's work is annotated ``## forward mbK ##`` / ``## backward mbK ##``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.nn import functional as F
from torch.profiler import record_function

__all__ = ["GPTStage", "Layout", "PipelineStep"]

FORWARD, BACKWARD = "forward", "backward"


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a rank sits in the stages × replicas grid.

    Attributes:
        rank: the global rank.
        stages: pipeline stages per replica.
        replicas: data-parallel copies of the pipeline.
    """

    rank: int
    stages: int
    replicas: int

    @property
    def stage(self) -> int:
        """This rank's stage, 0 first."""
        return self.rank % self.stages

    @property
    def replica(self) -> int:
        """This rank's data-parallel replica."""
        return self.rank // self.stages

    @property
    def is_first(self) -> bool:
        """Whether this stage embeds the tokens."""
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        """Whether this stage computes the loss."""
        return self.stage == self.stages - 1

    def stage_ranks(self, stage: int) -> list[int]:
        """The ranks that hold ``stage``, one per replica."""
        return [replica * self.stages + stage for replica in range(self.replicas)]


class GPTStage(nn.Module):
    """One stage's share of a ``GPT``: a contiguous run of its blocks, as evenly as possible or as asked.

    The first stage also owns the embeddings, the last the final norm, the head and the loss.

    Args:
        gpt (nn.Module): the whole model (a ``_gpt.GPT``), built the same on every rank.
        layout (Layout): which stage to keep.
        stage_layers (tuple[int, ...]): blocks per stage, first stage first (``CaptureConfig`` checks
            them); empty: an even split. (default: ``()``)

    Shapes:
        first stage: tokens int64[batch, seq]; others: activations float32[batch, seq, d_model].
        returns activations float32[batch, seq, d_model], or the scalar loss on the last stage.
    """

    def __init__(self, gpt: Any, layout: Layout, stage_layers: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.width = int(gpt.tok_emb.embedding_dim)
        layers = len(gpt.blocks)
        if stage_layers:
            bounds = [sum(stage_layers[:s]) for s in range(layout.stages + 1)]
        else:
            bounds = [round(s * layers / layout.stages) for s in range(layout.stages + 1)]
        self.blocks = nn.ModuleList(gpt.blocks[bounds[layout.stage] : bounds[layout.stage + 1]])
        self.embed = nn.ModuleDict({"tok": gpt.tok_emb, "pos": gpt.pos_emb}) if layout.is_first else None
        self.output = nn.ModuleDict({"ln_f": gpt.ln_f, "head": gpt.head}) if layout.is_last else None

    def forward(self, x: torch.Tensor, targets: torch.Tensor, mlp_repeat: int = 1) -> torch.Tensor:
        if self.embed is not None:
            positions = torch.arange(x.shape[1], device=x.device)
            x = self.embed["tok"](x) + self.embed["pos"](positions)
        for block in self.blocks:
            x = block(x, mlp_repeat)
        if self.output is None:
            return x
        logits = self.output["head"](self.output["ln_f"](x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


@dataclass(slots=True)
class _Run:
    """One step's state on one stage: its micro-batches, each one's stage input and output in flight."""

    tokens: tuple[torch.Tensor, ...]
    targets: tuple[torch.Tensor, ...]
    mlp_repeat: int
    pause_s: float
    inputs: dict[int, torch.Tensor] = field(default_factory=dict)
    outputs: dict[int, torch.Tensor] = field(default_factory=dict)
    compute_s: float = 0.0


class PipelineStep:
    """Forward and backward of one training step on one stage, 1F1B over ``microbatches``.

    Call it as ``step(tokens, targets, actions)``: it splits the batch into micro-batches, runs
    the stage's 1F1B order (``stages - stage - 1`` warm-up forwards, then one forward and one
    backward in turn, then the remaining backwards), exchanging activations and gradients with the
    neighbour stages, all-reduces the gradients over the stage's replicas and returns the CPU ms
    spent in forward and backward. ``actions`` may hold ``slow_compute`` (a factor on the MLP
    matmuls) and ``host_pause`` (ms slept after the first forward).

    gloo completes a send only once the peer posts its receive, so blocking sends would deadlock
    1F1B; as Megatron does, a stage that both sends to and receives from a neighbour posts both and
    then waits, receive first, so the ``gloo:send`` span holds the ``gloo:recv`` span.

    Args:
        model (GPTStage): this rank's stage.
        layout (Layout): this rank's place.
        microbatches (int): micro-batches per step; must divide the batch.
        replica_group (Any): process group of the ranks holding this stage, None with one replica.
    """

    def __init__(self, model: GPTStage, layout: Layout, microbatches: int, replica_group: Any) -> None:
        self.model = model
        self.layout = layout
        self.microbatches = microbatches
        self.replica_group = replica_group
        self.previous = None if layout.is_first else layout.rank - 1
        self.next = None if layout.is_last else layout.rank + 1

    @classmethod
    def build(cls, gpt: Any, layout: Layout, microbatches: int, stage_layers: tuple[int, ...] = ()) -> PipelineStep:
        """Split ``gpt`` (``stage_layers`` blocks per stage, or evenly) and make the replica groups; every
        rank must call it, in the same order."""
        group = None
        if layout.replicas > 1:  # every rank creates every group, in the same order
            group = [dist.new_group(layout.stage_ranks(s)) for s in range(layout.stages)][layout.stage]
        return cls(GPTStage(gpt, layout, stage_layers), layout, microbatches, group)

    def __call__(self, tokens: torch.Tensor, targets: torch.Tensor, actions: dict[str, float]) -> float:
        count = self.microbatches
        run = _Run(tokens.chunk(count), targets.chunk(count), int(actions.get("slow_compute", 1)),
                   actions.get("host_pause", 0.0) / 1e3)
        shape = (*run.tokens[0].shape, self.model.width)  # activations and their gradients
        warmup = min(self.layout.stages - self.layout.stage - 1, count)
        for mb in range(warmup):
            out = self._forward(run, mb, self._exchange(self.previous, receive=shape))
            self._exchange(self.next, send=out)
        x = self._exchange(self.previous, receive=shape) if warmup < count else None
        for mb in range(warmup, count):
            out = self._forward(run, mb, x)
            grad = self._exchange(self.next, send=out, receive=shape)
            dx = self._backward(run, mb - warmup, grad)
            x = self._exchange(self.previous, send=dx, receive=shape if mb + 1 < count else None)
        for mb in range(count - warmup, count):
            dx = self._backward(run, mb, self._exchange(self.next, receive=shape))
            self._exchange(self.previous, send=dx)
        self._all_reduce_gradients()
        return run.compute_s * 1e3

    def _forward(self, run: _Run, mb: int, x: torch.Tensor | None) -> torch.Tensor:
        if x is None:  # the first stage reads tokens
            x = run.tokens[mb]
        else:
            x.requires_grad_()
        start = time.thread_time()
        with record_function(f"## {FORWARD} mb{mb} ##"):
            out = self.model(x, run.targets[mb], run.mlp_repeat)
            out = out / self.microbatches if self.layout.is_last else out
        run.compute_s += time.thread_time() - start
        run.inputs[mb], run.outputs[mb] = x, out
        if mb == 0 and run.pause_s:
            time.sleep(run.pause_s)
        return out

    def _backward(self, run: _Run, mb: int, grad: torch.Tensor | None) -> torch.Tensor | None:
        out, x = run.outputs.pop(mb), run.inputs.pop(mb)
        start = time.thread_time()
        with record_function(f"## {BACKWARD} mb{mb} ##"):
            torch.autograd.backward(out, grad)
        run.compute_s += time.thread_time() - start
        return None if self.layout.is_first else x.grad

    def _exchange(
        self, peer: int | None, send: torch.Tensor | None = None, receive: tuple[int, ...] | None = None
    ) -> torch.Tensor | None:
        """Send ``send`` to ``peer`` and receive a tensor of shape ``receive`` from it, both optional."""
        if peer is None:
            return None
        sending = dist.isend(send.detach(), peer) if send is not None else None
        buffer = None
        if receive is not None:
            buffer = torch.empty(receive)
            dist.recv(buffer, peer)
        if sending is not None:
            sending.wait()
        return buffer

    def _all_reduce_gradients(self) -> None:
        if self.replica_group is None:
            return
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat, group=self.replica_group)
        flat /= self.layout.replicas
        for grad, reduced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            grad.copy_(reduced)
