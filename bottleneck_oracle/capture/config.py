"""What a real capture runs: the job's shape, the profiler schedule and the faults to inject.

No torch here: configs are built, checked and read back from manifests without the `capture` extra.
"""

from __future__ import annotations

from dataclasses import dataclass

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.injection import DEFAULT_SIZES, Injection
from bottleneck_oracle.truth.injection import parse_injection as _parse_any
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["CATEGORIES", "CaptureConfig", "parse_injection"]

CATEGORIES = (  # what a real capture can inject
    Bottleneck.HOST_PAUSE.value, Bottleneck.STRAGGLER_RANK.value, Bottleneck.DATALOADER_STALL.value,
    Bottleneck.SLOW_COMPUTE.value, Bottleneck.EXPOSED_COMMUNICATION.value, Bottleneck.CHECKPOINT_STALL.value,
)


def parse_injection(text: str) -> Injection:
    """Parse an injection a real capture can run (see ``truth.injection.parse_injection``).

    Raises:
        ConfigError: bad syntax, a category a capture cannot inject, a wrong unit or value.
    """
    return _parse_any(text, CATEGORIES)


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """What `capture` runs: the job's shape, the profiler schedule and the faults to inject.

    With the defaults a step takes about 25 ms for one rank alone on a CPU core.

    Attributes:
        ranks: processes (gloo world size); 1 works too.
        steps: active (recorded) profiler steps.
        layers, d_model, heads, seq_len, batch_size, vocab: the GPT and its batches.
        seed: seed of the weights (equal on all ranks) and of the data (seed + rank).
        injections: faults to inject; their steps must be recorded ones.
        wait_steps, warmup_steps: the profiler schedule before the active steps, so the
            first recorded step is `ProfilerStep#(wait_steps + warmup_steps)`.
        num_workers: DataLoader worker processes (0: the fetch runs in the step itself).
        timeout_s: limit for the whole job and for each gloo collective.
        pipeline: pipeline stages; above 1 the blocks are split over consecutive ranks, trained
            1F1B with send/recv, and `ranks` must be stages × data-parallel replicas.
        microbatches: micro-batches per step with a pipeline (each `batch_size / microbatches`
            sequences); must be 1 without one.
        stage_layers: blocks each pipeline stage holds, first stage first (e.g. `(1, 3)` for an
            unbalanced pipeline); one entry per stage, each >= 1, summing to `layers`. Empty: the
            blocks are split as evenly as possible.
        execution_trace: also record each rank's execution trace over the recorded steps. Off by
            default: it slows the recorded steps (CPU ops by about 10% to 80%) and reading them.
        pin_cpus: pin rank r (and every thread it starts) to this machine's CPU r mod their count, as
            each rank owns its device in a real job; a rank left free borrows an idle neighbour's core.
    """

    ranks: int = 2
    steps: int = 8
    layers: int = 2
    d_model: int = 128
    heads: int = 4
    seq_len: int = 64
    batch_size: int = 8
    vocab: int = 512
    seed: int = 0
    injections: tuple[Injection, ...] = ()
    wait_steps: int = 1
    warmup_steps: int = 1
    num_workers: int = 0
    timeout_s: float = 300.0
    pipeline: int = 1
    microbatches: int = 1
    stage_layers: tuple[int, ...] = ()
    execution_trace: bool = False
    pin_cpus: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "injections", tuple(self.injections))
        object.__setattr__(self, "stage_layers", tuple(self.stage_layers))  # a list when read from JSON
        positive = ("ranks", "steps", "layers", "d_model", "heads", "seq_len", "batch_size", "vocab",
                    "pipeline", "microbatches")
        for name in (*positive, "timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"capture config: {name} must be positive, got {getattr(self, name)}")
        if self.wait_steps < 0 or self.warmup_steps < 1 or self.num_workers < 0:
            raise ConfigError("capture config: need wait_steps >= 0, warmup_steps >= 1, num_workers >= 0")
        if self.d_model % self.heads:
            raise ConfigError(f"capture config: heads ({self.heads}) must divide d_model ({self.d_model})")
        self._check_pipeline()
        for injection in self.injections:
            self._check_injection(injection)
        seen = [(i.category, i.step, rank) for i in self.resolved_injections() for rank in i.ranks]
        if len(set(seen)) != len(seen):
            raise ConfigError("capture config: two injections of one category hit the same step and rank")

    def _check_pipeline(self) -> None:
        if self.pipeline == 1 and self.microbatches > 1:
            raise ConfigError(f"capture config: {self.microbatches} microbatches need a pipeline (pipeline > 1)")
        if self.ranks % self.pipeline:
            raise ConfigError(f"capture config: ranks ({self.ranks}) must be a multiple of the pipeline "
                              f"stages ({self.pipeline}): stages x data-parallel replicas")
        if self.layers < self.pipeline:
            raise ConfigError(f"capture config: {self.layers} layers cannot fill {self.pipeline} pipeline stages")
        if self.batch_size % self.microbatches:
            raise ConfigError(f"capture config: microbatches ({self.microbatches}) must divide "
                              f"batch_size ({self.batch_size})")
        self._check_stage_layers()

    def _check_stage_layers(self) -> None:
        split = self.stage_layers
        if not split:
            return
        if len(split) != self.pipeline:
            raise ConfigError(f"capture config: stage_layers {list(split)} has {len(split)} entries for "
                              f"{self.pipeline} pipeline stages")
        if any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in split):
            raise ConfigError(f"capture config: stage_layers {list(split)}: every stage needs at least 1 layer")
        if sum(split) != self.layers:
            raise ConfigError(f"capture config: stage_layers {list(split)} sum to {sum(split)}, "
                              f"not the {self.layers} layers")

    def _check_injection(self, injection: Injection) -> None:
        if injection.category not in CATEGORIES:
            raise ConfigError(f"injection {injection}: a capture cannot inject {injection.category}; "
                              f"use one of {', '.join(CATEGORIES)}")
        steps = self.recorded_steps
        if injection.step not in steps:
            raise ConfigError(
                f"injection {injection}: step {injection.step} is not recorded; "
                f"ProfilerStep#{steps.start} to #{steps.stop - 1} are"
            )
        if injection.ranks and injection.ranks[-1] >= self.ranks:
            raise ConfigError(f"injection {injection}: rank {injection.ranks[-1]} >= ranks ({self.ranks})")
        if injection.category == "exposed_communication" and 0 < len(injection.ranks) < self.ranks:
            raise ConfigError(f"injection {injection}: a collective runs on every rank; drop the rank list")

    @property
    def recorded_steps(self) -> range:
        """The `ProfilerStep#N` numbers the traces hold."""
        first = self.wait_steps + self.warmup_steps
        return range(first, first + self.steps)

    def resolved_injections(self) -> tuple[Injection, ...]:
        """The injections with explicit ranks (all when none were given) and sizes (defaults filled)."""
        everyone = tuple(range(self.ranks))
        return tuple(
            Injection(i.category, i.step, i.ranks or everyone, i.size or DEFAULT_SIZES[i.category])
            for i in self.injections
        )
