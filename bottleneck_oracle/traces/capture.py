"""Capture real traces: a small GPT trained with DDP (or pipeline stages) over gloo under torch.profiler.

`capture()` runs one process per rank, writes `rank{r}.pt.trace.json.gz` per rank (through
`instrument.StepProfiler`; with `execution_trace`, also its execution trace `rank{r}.et.json.gz`)
and a `manifest.json` holding the injected faults (ground truth) and every step's measured wall time.
Torch (the `capture` extra) is imported only when `capture()` runs, so the records, `parse_injection`
and `load_manifest` work without it.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.traces.injection import DEFAULT_SIZES, UNITS, Injection
from bottleneck_oracle.traces.injection import parse_injection as _parse_any
from bottleneck_oracle.traces.manifest import MANIFEST_NAME, read_manifest
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = [
    "CATEGORIES",
    "DEFAULT_SIZES",
    "ET_PATTERN",
    "MANIFEST_NAME",
    "TRACE_PATTERN",
    "UNITS",
    "CaptureConfig",
    "GroundTruth",
    "Injection",
    "Manifest",
    "capture",
    "load_manifest",
    "parse_injection",
]

logger = logging.getLogger(__name__)

CATEGORIES = (  # what a real capture can inject
    Bottleneck.HOST_PAUSE.value, Bottleneck.STRAGGLER_RANK.value, Bottleneck.DATALOADER_STALL.value,
    Bottleneck.SLOW_COMPUTE.value, Bottleneck.EXPOSED_COMMUNICATION.value, Bottleneck.CHECKPOINT_STALL.value,
)
TRACE_PATTERN = "rank{rank}.pt.trace.json.gz"
ET_PATTERN = "rank{rank}.et.json.gz"  # beside each trace; read_trace pairs them
_SLEEPS = frozenset({Bottleneck.HOST_PAUSE, Bottleneck.STRAGGLER_RANK, Bottleneck.DATALOADER_STALL})
_MANIFEST_FORMAT = 1


def parse_injection(text: str) -> Injection:
    """Parse an injection a real capture can run (see ``traces.injection.parse_injection``).

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
        execution_trace: also record each rank's execution trace over the recorded steps. Off by
            default: it slows the recorded steps (CPU ops by about 10% to 80%) and reading them.
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
    execution_trace: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "injections", tuple(self.injections))
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


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """One injected fault as it happened.

    Attributes:
        category, step, ranks: what was injected where (`ranks` explicit, never empty).
        size, unit: the requested size (`ms`, `x` or `MB`).
        injected_ms: the time the fault added on its ranks: the requested ms for sleeps,
            else measured: the all-reduce's and the save's wall time, and for `slow_compute`
            the forward+backward CPU time of the main thread above the rank's median step;
            averaged over the ranks; None if it could not be measured.
    """

    category: str
    step: int
    ranks: tuple[int, ...]
    size: float
    unit: str
    injected_ms: float | None


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a capture produced, stored as `manifest.json` beside the traces.

    Attributes:
        config: the capture settings.
        traces: trace file names by rank, relative to the manifest's folder.
        ground_truth: the injected faults.
        step_wall_ms: rank -> ProfilerStep number -> wall time of that iteration (perf_counter).
        torch_version: the torch that ran the job.
        capture_s: seconds the whole capture took, process start-up included.
    """

    config: CaptureConfig
    traces: tuple[str, ...]
    ground_truth: tuple[GroundTruth, ...]
    step_wall_ms: dict[int, dict[int, float]]
    torch_version: str
    capture_s: float


def _ground_truth(
    config: CaptureConfig, measured: Sequence[dict[int, dict[str, float]]]
) -> tuple[GroundTruth, ...]:
    """The resolved injections with their injected ms (requested for sleeps, else measured)."""
    truths = []
    for i in config.resolved_injections():
        assert i.size is not None  # resolved
        injected_ms: float | None = i.size
        if i.category not in _SLEEPS:
            values = [measured[rank].get(i.step, {}).get(i.category) for rank in i.ranks]
            known = [value for value in values if value is not None]
            injected_ms = round(statistics.fmean(known), 3) if known else None
        truths.append(GroundTruth(i.category, i.step, i.ranks, i.size, i.unit, injected_ms))
    return tuple(truths)


def _config_to_json(config: CaptureConfig) -> dict[str, Any]:
    data = {f.name: getattr(config, f.name) for f in fields(config)}
    data["injections"] = [str(injection) for injection in config.injections]
    return data


def _manifest_to_json(manifest: Manifest) -> dict[str, Any]:
    return {
        "format": _MANIFEST_FORMAT,
        "config": _config_to_json(manifest.config),
        "recorded_steps": list(manifest.config.recorded_steps),
        "traces": {str(rank): name for rank, name in enumerate(manifest.traces)},
        "ground_truth": [
            {f.name: getattr(truth, f.name) for f in fields(truth)} for truth in manifest.ground_truth
        ],
        "step_wall_ms": {
            str(rank): {str(step): round(ms, 3) for step, ms in steps.items()}
            for rank, steps in manifest.step_wall_ms.items()
        },
        "torch_version": manifest.torch_version,
        "capture_s": manifest.capture_s,
    }


def _manifest_from_json(data: dict[str, Any]) -> Manifest:
    if data.get("format") != _MANIFEST_FORMAT:
        raise ValueError(f"format {data.get('format')!r}, expected {_MANIFEST_FORMAT}")
    settings = dict(data["config"])
    settings["injections"] = tuple(parse_injection(text) for text in settings["injections"])
    traces = data["traces"]
    return Manifest(
        config=CaptureConfig(**settings),
        traces=tuple(traces[str(rank)] for rank in range(len(traces))),
        ground_truth=tuple(
            GroundTruth(**{**truth, "ranks": tuple(truth["ranks"])}) for truth in data["ground_truth"]
        ),
        step_wall_ms={
            int(rank): {int(step): float(ms) for step, ms in steps.items()}
            for rank, steps in data["step_wall_ms"].items()
        },
        torch_version=str(data["torch_version"]),
        capture_s=float(data["capture_s"]),
    )


def load_manifest(path: Path) -> Manifest:
    """Read a capture's `manifest.json`.

    Args:
        path: the manifest file, or the capture folder holding it.

    Returns:
        The manifest.

    Raises:
        TraceFormatError: the file is missing, not JSON, or not a capture manifest.
    """
    return read_manifest(path, _manifest_from_json, "capture")


def _check_out_dir(out_dir: Path, world: int) -> None:
    """Refuse a folder holding traces of ranks this capture will not overwrite."""
    for pattern in (TRACE_PATTERN, ET_PATTERN):
        ours = {pattern.format(rank=rank) for rank in range(world)}
        for stale in sorted(out_dir.glob(pattern.format(rank="*"))):
            if stale.name not in ours:
                raise ConfigError(f"{stale}: a trace from another capture; remove it or use an empty folder")


def capture(out_dir: Path, config: CaptureConfig) -> Manifest:
    """Train a small GPT with DDP (or pipeline stages) over gloo under torch.profiler, write its traces.

    Each rank runs in its own Python process on 127.0.0.1 with one CPU thread and writes
    `out_dir/rank{r}.pt.trace.json.gz` (gzipped Kineto JSON with `distributedInfo`) and, with
    `config.execution_trace`, `out_dir/rank{r}.et.json.gz` (its execution trace); then
    `out_dir/manifest.json` records the config, the ground truth of the injections and the
    measured wall time of every recorded step on every rank.

    Example:
        ```python
        config = CaptureConfig(ranks=2, steps=6, injections=(parse_injection("straggler_rank@5:1"),))
        manifest = capture(Path("examples/gpt_2rank"), config)
        ```

    Args:
        out_dir: folder for the traces and the manifest; created if missing.
        config: the job, the schedule and the injections.

    Returns:
        The manifest that was written.

    Raises:
        CaptureError: a rank failed (with its error) or the job ran past `config.timeout_s`.
        ConfigError: `out_dir` holds traces of ranks outside this capture.
    """
    # torch is the optional `capture` extra: import the job (and torch) only when a capture runs.
    from bottleneck_oracle.traces import _gpt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_out_dir(out_dir, config.ranks)
    start = time.perf_counter()
    results = _gpt.run_job(config, out_dir.resolve())
    manifest = Manifest(
        config=config,
        traces=tuple(TRACE_PATTERN.format(rank=rank) for rank in range(config.ranks)),
        ground_truth=_ground_truth(config, [result.measured_ms for result in results]),
        step_wall_ms={rank: result.step_wall_ms for rank, result in enumerate(results)},
        torch_version=_gpt.TORCH_VERSION,
        capture_s=round(time.perf_counter() - start, 3),
    )
    (out_dir / MANIFEST_NAME).write_text(json.dumps(_manifest_to_json(manifest), indent=2) + "\n")
    logger.info("captured %d ranks into %s in %.1f s", config.ranks, out_dir, manifest.capture_s)
    return manifest
