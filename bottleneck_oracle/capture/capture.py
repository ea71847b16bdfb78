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

from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.manifest import (
    MANIFEST_NAME,
    TRACE_PATTERN,
    GroundTruth,
    read_manifest,
)
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["ET_PATTERN", "Manifest", "capture", "load_manifest"]

logger = logging.getLogger(__name__)

ET_PATTERN = "rank{rank}.et.json.gz"  # beside each trace; read_trace pairs them
_SLEEPS = frozenset({Bottleneck.HOST_PAUSE, Bottleneck.STRAGGLER_RANK, Bottleneck.DATALOADER_STALL})
_MANIFEST_FORMAT = 1


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
    from bottleneck_oracle.capture import _gpt

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
