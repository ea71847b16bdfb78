"""The order in which one pipeline stage runs forward and backward passes (1F1B, optionally interleaved).

Megatron's schedules: a stage first runs ``warmup`` forwards, then alternates one forward and
one backward, then drains the remaining backwards. Without pipelining (pp = 1) the
micro-batches run forward then backward one after the other (gradient accumulation).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Unit", "unit_order", "warmup_forwards"]


@dataclass(frozen=True, slots=True)
class Unit:
    """One forward or backward pass of one micro-batch through one model chunk of a stage."""

    forward: bool
    chunk: int
    microbatch: int


def warmup_forwards(pp: int, stage: int, microbatches: int, virtual: int) -> int:
    """Forwards a stage runs before its first backward.

    Non-interleaved: pp - stage - 1. Interleaved: 2·(pp - stage - 1) + (virtual - 1)·pp.
    Both are capped at the number of forward passes.
    """
    total = microbatches * virtual
    if virtual == 1:
        return min(pp - stage - 1, total)
    return min(2 * (pp - stage - 1) + (virtual - 1) * pp, total)


def _unit(k: int, pp: int, virtual: int, forward: bool) -> Unit:
    group = (k // pp) % virtual
    chunk = group if forward else virtual - 1 - group
    return Unit(forward, chunk, (k // (pp * virtual)) * pp + k % pp)


def unit_order(pp: int, stage: int, microbatches: int, virtual: int = 1) -> tuple[Unit, ...]:
    """Every pass one stage runs in one step, in order.

    Args:
        pp: pipeline stages.
        stage: this stage (0 = first).
        microbatches: micro-batches per step.
        virtual: model chunks per stage (2 = interleaved 1F1B; needs microbatches % pp == 0).

    Returns:
        ``2 · microbatches · virtual`` units.
    """
    if pp == 1:
        return tuple(Unit(f, 0, mb) for mb in range(microbatches) for f in (True, False))
    total = microbatches * virtual
    warmup = warmup_forwards(pp, stage, microbatches, virtual)
    order = [_unit(k, pp, virtual, True) for k in range(warmup)]
    for i in range(total - warmup):
        order += [_unit(warmup + i, pp, virtual, True), _unit(i, pp, virtual, False)]
    order += [_unit(k, pp, virtual, False) for k in range(total - warmup, total)]
    return tuple(order)
