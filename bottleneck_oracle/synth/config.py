"""SynthConfig: the job a synthetic trace shows (model, GPUs, parallelism, schedule, faults)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.hardware import HARDWARE, Hardware
from bottleneck_oracle.synth.model import MODELS, ModelSpec
from bottleneck_oracle.truth.injection import DEFAULT_SIZES, Injection, parse_injection

__all__ = ["MAX_RANKS", "SynthConfig"]

MAX_RANKS = 4096  # the jobs the scale benchmark writes (benchmarks/bench_scale.py) go to 1,024
_VIRTUAL_STAGES = 2  # model chunks per stage with interleave=True


def _check_injection(config: SynthConfig, injection: Injection) -> None:
    where = f"injection {injection}"
    if injection.step not in config.recorded_steps:
        steps = config.recorded_steps
        raise ConfigError(f"{where}: step {injection.step} is not recorded; ProfilerStep#{steps.start} "
                          f"to #{steps.stop - 1} are")
    if injection.ranks and injection.ranks[-1] >= config.ranks:
        raise ConfigError(f"{where}: rank {injection.ranks[-1]} >= ranks ({config.ranks})")
    if injection.category == "exposed_communication" and 0 < len(injection.ranks) < config.ranks:
        raise ConfigError(f"{where}: the extra all-reduce runs on every rank; drop the rank list")
    if injection.category == "pipeline_bubble":
        if config.pp == 1:
            raise ConfigError(f"{where}: a pipeline bubble needs pp > 1")
        last = [r for r in injection.ranks if config.stage_of(r) == config.pp - 1]
        if last:
            raise ConfigError(f"{where}: rank {last[0]} is on the last stage, which sends no activations")


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """What `synthesize` and `simulate` run.

    Ranks are laid out as Megatron does: tensor-parallel ranks adjacent (rank = stage·dp·tp
    + dp_index·tp + tp_index), 8 GPUs per node.

    Attributes:
        model: a name in ``MODELS`` or a ``ModelSpec``.
        hardware: a name in ``HARDWARE`` or a ``Hardware``.
        dp, tp, pp: data-, tensor- and pipeline-parallel degrees; dp·tp·pp ranks, 1 to 64.
        microbatches: micro-batches per step (1F1B over them when pp > 1, gradient
            accumulation otherwise).
        steps: recorded profiler steps.
        seed: seed of the kernel-time noise.
        injections: faults (``parse_injection``); their steps must be recorded ones. On their ranks
            and step: ``dataloader_stall`` SIZE ms more inside the DataLoader's ``__next__``;
            ``straggler_rank`` SIZE ms of CPU delay at the step start; ``host_pause`` an uncovered
            SIZE ms CPU gap mid-forward; ``exposed_communication`` an extra blocking all-reduce of
            SIZE MB over every rank after the backward; ``slow_compute`` compute kernels SIZE×
            longer; ``host_sync`` mid-forward ``.item()`` calls worth about SIZE ms (one per 30 µs);
            ``launch_overhead`` the CPU time of every op SIZE× (the GPU starves when kernels are
            short); ``pipeline_bubble`` the first activation send of the step SIZE ms slower (default
            ranks: the first stage); ``checkpoint_stall`` a ``checkpoint_save`` range: device sync,
            SIZE MB copied to the host and written at the disk's bandwidth.
        interference: a compute kernel that overlaps a communication transfer on its GPU
            runs this much slower for the overlapped time (0.25: 25%).
        interleave: two virtual pipeline stages per rank (interleaved 1F1B).
        noise: relative standard deviation of kernel and CPU op times.
        first_step: the N of the first ``ProfilerStep#N``.
        micro_batch: samples per micro-batch (default: the model's).
        efficiency: share of peak FLOP/s a GEMM reaches (default: the hardware's).
        distributed_optimizer: reduce-scatter gradients and all-gather parameters over
            the data-parallel group (ZeRO-1) instead of all-reducing gradients.
        bucket_mb: DDP gradient bucket size.
        clock_skew_ms: the clock of node k (ranks 8k to 8k+7) reads k times this ahead of node 0's:
            hosts whose clocks NTP keeps only roughly in step, as in a job across machines.
    """

    model: str | ModelSpec = "tiny"
    hardware: str | Hardware = "H100"
    dp: int = 1
    tp: int = 1
    pp: int = 1
    microbatches: int = 1
    steps: int = 4
    seed: int = 0
    injections: tuple[Injection, ...] = ()
    interference: float = 0.25
    interleave: bool = False
    noise: float = 0.02
    first_step: int = 1
    micro_batch: int | None = None
    efficiency: float | None = None
    distributed_optimizer: bool = False
    bucket_mb: float = 25.0
    clock_skew_ms: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "injections", tuple(
            parse_injection(i) if isinstance(i, str) else i for i in self.injections))
        if isinstance(self.model, str) and self.model not in MODELS:
            raise ConfigError(f"synth config: unknown model {self.model!r}; use one of {', '.join(MODELS)}")
        if isinstance(self.hardware, str) and self.hardware not in HARDWARE:
            raise ConfigError(f"synth config: unknown hardware {self.hardware!r}; use one of {', '.join(HARDWARE)}")
        self._check_sizes()
        self._check_shapes()
        for injection in self.injections:
            _check_injection(self, injection)
        seen = [(i.category, i.step, r) for i in self.resolved_injections() for r in i.ranks]
        if len(set(seen)) != len(seen):
            raise ConfigError("synth config: two injections of one category hit the same step and rank")

    def _check_sizes(self) -> None:
        for name in ("dp", "tp", "pp", "microbatches", "steps"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ConfigError(f"synth config: {name} must be an integer >= 1, got {getattr(self, name)!r}")
        if not 1 <= self.ranks <= MAX_RANKS:
            raise ConfigError(f"synth config: dp·tp·pp = {self.ranks} ranks; 1 to {MAX_RANKS} are supported")
        if self.first_step < 0 or self.interference < 0 or not 0 <= self.noise <= 0.5:
            raise ConfigError("synth config: need first_step >= 0, interference >= 0 and 0 <= noise <= 0.5")
        if (self.micro_batch is not None and self.micro_batch < 1) or self.bucket_mb <= 0:
            raise ConfigError("synth config: micro_batch must be >= 1 and bucket_mb > 0")
        if not abs(self.clock_skew_ms) <= 1000:
            raise ConfigError(f"synth config: clock_skew_ms must be within ±1000, got {self.clock_skew_ms}")
        if self.efficiency is not None and not 0 < self.efficiency <= 1:
            raise ConfigError(f"synth config: efficiency must be in (0, 1], got {self.efficiency}")

    def _check_shapes(self) -> None:
        spec = self.model_spec
        for name in ("heads", "ffn", "d_model"):
            if getattr(spec, name) % self.tp:
                raise ConfigError(f"synth config: tp={self.tp} does not divide {spec.name}'s {name} "
                                  f"({getattr(spec, name)})")
        chunks = self.pp * self.virtual_stages
        if spec.layers % chunks:
            raise ConfigError(f"synth config: {spec.name}'s {spec.layers} layers do not split into "
                              f"{chunks} pipeline chunks")
        if self.interleave and (self.pp == 1 or self.microbatches % self.pp):
            raise ConfigError(f"synth config: interleave needs pp > 1 and microbatches ({self.microbatches}) "
                              f"divisible by pp ({self.pp})")

    @property
    def ranks(self) -> int:
        """World size: dp·tp·pp."""
        return self.dp * self.tp * self.pp

    @property
    def model_spec(self) -> ModelSpec:
        """The model, resolved from its name."""
        return MODELS[self.model] if isinstance(self.model, str) else self.model

    @property
    def hardware_spec(self) -> Hardware:
        """The hardware, resolved from its name."""
        return HARDWARE[self.hardware] if isinstance(self.hardware, str) else self.hardware

    @property
    def virtual_stages(self) -> int:
        """Model chunks per pipeline stage: 2 with interleave, else 1."""
        return _VIRTUAL_STAGES if self.interleave else 1

    @property
    def batch(self) -> int:
        """Samples per micro-batch."""
        return self.micro_batch or self.model_spec.micro_batch

    @property
    def compute_efficiency(self) -> float:
        """Share of peak FLOP/s a GEMM reaches."""
        return self.efficiency or self.hardware_spec.efficiency

    @property
    def recorded_steps(self) -> range:
        """The ``ProfilerStep#N`` numbers the traces hold."""
        return range(self.first_step, self.first_step + self.steps)

    def stage_of(self, rank: int) -> int:
        """Pipeline stage of a rank."""
        return rank // (self.dp * self.tp)

    def resolved_injections(self) -> tuple[Injection, ...]:
        """Injections with explicit ranks and sizes; pipeline bubbles default to the first stage's ranks."""
        out = []
        for i in self.injections:
            ranks = i.ranks or tuple(range(self.ranks))
            if i.category == "pipeline_bubble" and not i.ranks:
                ranks = tuple(r for r in range(self.ranks) if self.stage_of(r) == 0)
            out.append(Injection(i.category, i.step, ranks, i.size or DEFAULT_SIZES[i.category]))
        return tuple(out)

    def with_changes(self, **changes: Any) -> SynthConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The config as JSON-ready data (models and hardware by name, or their fields)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["injections"] = [str(i) for i in self.injections]
        for key in ("model", "hardware"):
            if not isinstance(data[key], str):
                data[key] = {f.name: getattr(data[key], f.name) for f in fields(data[key])}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SynthConfig:
        """Inverse of `to_json`.

        Raises:
            ConfigError: an invalid config.
        """
        settings = dict(data)
        if isinstance(settings.get("model"), dict):
            settings["model"] = ModelSpec(**settings["model"])
        if isinstance(settings.get("hardware"), dict):
            hw = dict(settings["hardware"])
            hw["compute_capability"] = tuple(hw["compute_capability"])
            settings["hardware"] = Hardware(**hw)
        settings["injections"] = tuple(parse_injection(t) for t in settings.get("injections", ()))
        return cls(**settings)
