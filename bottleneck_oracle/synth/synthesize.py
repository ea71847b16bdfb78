"""Write a synthetic job: one Kineto trace per rank and a manifest with the ground truth.

The manifest holds the config, every injection with the time it added (measured in the
simulation against the same job without it) and the true time of every step on every rank.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.job import Tuning
from bottleneck_oracle.synth.kineto_writer import rank_data, render_rank
from bottleneck_oracle.synth.schedule import SimResult, Timeline, run, simulate
from bottleneck_oracle.truth.manifest import (
    MANIFEST_NAME,
    TRACE_PATTERN,
    GroundTruth,
    read_manifest,
)

__all__ = ["MANIFEST_NAME", "TRACE_PATTERN", "SynthManifest", "ground_truth", "load_synth_manifest", "synthesize"]

_FORMAT = 1
_GENERATOR = "bottleneck_oracle.traces.synth"  # a format name: kept from its first home so older corpora still read


@dataclass(frozen=True, slots=True)
class SynthManifest:
    """What `synthesize` wrote, stored as ``manifest.json`` beside the traces.

    Attributes:
        config: the job.
        traces: trace file names by rank, relative to the manifest's folder.
        ground_truth: the injections with explicit ranks and sizes; ``injected_ms`` is the
            mean over their ranks of the step's time minus its time in the same job without
            this injection.
        step_ms: rank → ProfilerStep number → true step time (ms).
        events: trace events written, all ranks together.
    """

    config: SynthConfig
    traces: tuple[str, ...]
    ground_truth: tuple[GroundTruth, ...]
    step_ms: dict[int, dict[int, float]]
    events: int


def _without(config: SynthConfig, index: int | None) -> SynthConfig:
    """The job without injection ``index`` (None: without any)."""
    kept = () if index is None else tuple(i for k, i in enumerate(config.injections) if k != index)
    return config.with_changes(injections=kept)


def ground_truth(config: SynthConfig, result: SimResult) -> tuple[GroundTruth, ...]:
    """Every injection with the time it added on its ranks in its step.

    An injection alone in its step is measured against the job without any injection;
    one sharing its step with others against the job without only itself.
    """
    resolved = config.resolved_injections()
    if not resolved:
        return ()
    clean = simulate(_without(config, None))
    truths = []
    for k, inj in enumerate(resolved):
        alone = sum(other.step == inj.step for other in resolved) == 1
        base = clean if alone else simulate(_without(config, k))
        extra = [result.ms(inj.step, r) - base.ms(inj.step, r) for r in inj.ranks]
        assert inj.size is not None
        truths.append(GroundTruth(inj.category, inj.step, inj.ranks, inj.size, inj.unit,
                                  round(sum(extra) / len(extra), 3)))
    return tuple(truths)


def _manifest_json(m: SynthManifest) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "generator": _GENERATOR,
        "config": m.config.to_json(),
        "recorded_steps": list(m.config.recorded_steps),
        "traces": {str(rank): name for rank, name in enumerate(m.traces)},
        "ground_truth": [{f.name: getattr(t, f.name) for f in fields(t)} for t in m.ground_truth],
        "step_ms": {str(r): {str(s): round(ms, 6) for s, ms in steps.items()} for r, steps in m.step_ms.items()},
        "events": m.events,
    }


def _render_all(timeline: Timeline, ranks: int, workers: int) -> list[tuple[bytes, int]]:
    items = [rank_data(timeline, r) for r in range(ranks)]
    if workers <= 1 or ranks == 1:
        return [render_rank(item) for item in items]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, ranks), mp_context=context) as pool:
        return list(pool.map(render_rank, items, chunksize=max(1, ranks // (4 * workers))))


def synthesize(out_dir: Path, config: SynthConfig, *, workers: int | None = None,
               tuning: Tuning | None = None) -> SynthManifest:
    """Simulates ``config``'s job and writes ``rank{r}.pt.trace.json.gz`` per rank and ``manifest.json``.

    Same config, same bytes: files carry no wall-clock time and the gzip header no date.

    Example:
        ```python
        config = SynthConfig(model="7b", dp=8, tp=4, pp=2, microbatches=2,
                             injections=(parse_injection("straggler_rank@3:5=50ms"),))
        manifest = synthesize(Path("traces/7b"), config)
        ```

    Args:
        out_dir: folder for the traces and the manifest; created if missing.
        config: the job.
        workers: processes that render rank files in parallel (default: the CPU count).
        tuning: speed-ups to simulate the job with (a what-if's re-run, ``synth/whatif.py``); the
            manifest's ground truth stays that of the job as configured.

    Returns:
        The manifest that was written.

    Raises:
        ConfigError: ``out_dir`` holds traces of ranks outside this job.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ours = {TRACE_PATTERN.format(rank=r) for r in range(config.ranks)}
    for stale in sorted(out_dir.glob(TRACE_PATTERN.format(rank="*"))):
        if stale.name not in ours:
            raise ConfigError(f"{stale}: a trace of another job; remove it or use an empty folder")
    result, timeline = run(config, tuning)
    blobs = _render_all(timeline, config.ranks, workers or os.cpu_count() or 1)
    for rank, (blob, _) in enumerate(blobs):
        (out_dir / TRACE_PATTERN.format(rank=rank)).write_bytes(blob)
    names = tuple(TRACE_PATTERN.format(rank=r) for r in range(config.ranks))
    manifest = SynthManifest(config, names, ground_truth(config, result), result.by_rank(),
                             sum(count for _, count in blobs))
    (out_dir / MANIFEST_NAME).write_text(json.dumps(_manifest_json(manifest), indent=1) + "\n")
    return manifest


def _manifest_from_json(data: dict[str, Any]) -> SynthManifest:
    if data.get("format") != _FORMAT or data.get("generator") != _GENERATOR:
        raise ValueError(f"format {data.get('format')!r} of {data.get('generator')!r}, expected {_FORMAT}")
    traces = data["traces"]
    return SynthManifest(
        config=SynthConfig.from_json(data["config"]),
        traces=tuple(traces[str(r)] for r in range(len(traces))),
        ground_truth=tuple(GroundTruth(**{**t, "ranks": tuple(t["ranks"])}) for t in data["ground_truth"]),
        step_ms={int(r): {int(s): float(ms) for s, ms in steps.items()} for r, steps in data["step_ms"].items()},
        events=int(data["events"]),
    )


def load_synth_manifest(path: Path) -> SynthManifest:
    """Reads a synthetic job's ``manifest.json``.

    Args:
        path: the manifest, or the folder holding it.

    Raises:
        TraceFormatError: the file is missing, not JSON, or not a synthetic-trace manifest.
    """
    return read_manifest(path, _manifest_from_json, "synthetic-trace")

