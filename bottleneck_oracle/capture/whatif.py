"""What-if truth for real captures: the same job captured again with one change, its step times measured.

A real job cannot be simulated, so the truth of "what if this stall were gone", "what if the
pipeline ran twice the micro-batches" or "what if there were 4 data-parallel replicas" is the job
run again with the change. The times are measured on a shared CPU machine: judge a prediction
against the spread of the baseline's clean steps, not to the microsecond. A capture cannot make
gloo or CPU kernels k times faster, so those edits are the simulator's alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bottleneck_oracle.capture.capture import Manifest, capture
from bottleneck_oracle.capture.config import CaptureConfig
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import (
    WHATIF_NAME,
    Edit,
    EditKind,
    edit_to_json,
    fixed_injections,
    step_rows,
    write_whatif,
)

__all__ = ["CAPTURE_EDITS", "WHATIF_DIR", "WHATIF_NAME", "CaptureWhatIf", "apply_capture_edit", "capture_whatif"]

logger = logging.getLogger(__name__)

CAPTURE_EDITS = (EditKind.REMOVE_INJECTION, EditKind.FIX, EditKind.MICROBATCHES, EditKind.DATA_PARALLEL)
WHATIF_DIR = "whatif"  # edited captures go to OUT_DIR/whatif/<index>-<kind>/


def apply_capture_edit(config: CaptureConfig, edit: Edit) -> CaptureConfig:
    """The capture job with ``edit`` applied.

    Raises:
        ConfigError: an edit a capture cannot make, or one that does not fit the job (an
            injection index out of range, micro-batches without a pipeline, a batch that does
            not split, injections on ranks the edited job lacks).
    """
    try:
        return _edited(config, edit)
    except ConfigError as e:
        if str(e).startswith(f"edit {edit.kind}"):
            raise
        raise ConfigError(f"edit {edit.kind}: the edited job is invalid: {e}") from None


def _edited(config: CaptureConfig, edit: Edit) -> CaptureConfig:
    if edit.kind not in CAPTURE_EDITS:
        kinds = ", ".join(CAPTURE_EDITS)
        raise ConfigError(f"edit {edit.kind}: a real capture cannot make {edit}; use one of {kinds} "
                          "(or oracle synth)")
    if edit.kind == EditKind.REMOVE_INJECTION:
        if not 0 <= edit.value < len(config.injections):
            raise ConfigError(f"edit {edit.kind}: no injection {edit.value}; the job has {len(config.injections)}")
        return replace(config, injections=tuple(i for k, i in enumerate(config.injections) if k != edit.value))
    if edit.kind == EditKind.FIX:
        return replace(config, injections=fixed_injections(config.injections, edit))
    if edit.kind == EditKind.DATA_PARALLEL:
        if edit.global_batch_kept:
            raise ConfigError(f"edit {edit.kind}: a capture keeps the per-rank batch; drop global_batch")
        return replace(config, ranks=config.pipeline * edit.value)
    if config.pipeline == 1:
        raise ConfigError(f"edit {edit.kind}: micro-batches need a pipeline capture (pipeline > 1)")
    if edit.global_batch_kept:
        return replace(config, microbatches=edit.value)
    per_microbatch, rest = divmod(config.batch_size, config.microbatches)
    if rest:
        raise ConfigError(f"edit {edit.kind}: a batch of {config.batch_size} does not split into "
                          f"{config.microbatches} micro-batches")
    return replace(config, microbatches=edit.value, batch_size=per_microbatch * edit.value)


@dataclass(frozen=True, slots=True)
class CaptureWhatIf:
    """A capture and its re-capture with one change.

    Attributes:
        edit: the change.
        folder: where the edited capture's traces are, relative to the baseline's folder.
        baseline: the manifest of the job as configured.
        edited: the manifest of the job with the change.
    """

    edit: Edit
    folder: str
    baseline: Manifest
    edited: Manifest

    def speedup(self) -> float:
        """Mean job step time (slowest rank per step) before over after."""
        return _mean_job_ms(self.baseline) / _mean_job_ms(self.edited)

    def to_json(self) -> dict[str, object]:
        return {"edit": edit_to_json(self.edit), "traces": self.folder, "speedup": round(self.speedup(), 4),
                "step_ms": step_rows(_by_step_rank(self.baseline), _by_step_rank(self.edited))}


def _by_step_rank(manifest: Manifest) -> dict[tuple[int, int], float]:
    return {(step, rank): ms for rank, steps in manifest.step_wall_ms.items() for step, ms in steps.items()}


def _mean_job_ms(manifest: Manifest) -> float:
    steps = sorted({s for per_rank in manifest.step_wall_ms.values() for s in per_rank})
    return float(np.mean([max(per_rank[s] for per_rank in manifest.step_wall_ms.values() if s in per_rank)
                          for s in steps]))


def capture_whatif(out_dir: Path, config: CaptureConfig, edits: Sequence[Edit]) -> list[CaptureWhatIf]:
    """Capture the job into ``out_dir``, then once per edit into ``out_dir/whatif/<i>-<kind>/``.

    Writes ``out_dir/whatif.json``: ``{"edits": [{"edit", "traces", "speedup", "step_ms":
    [[step, rank, baseline_ms, edited_ms], ...]}]}`` (a time is null where a rank exists on one
    side only), the same layout as a synthetic sample's.

    Raises:
        ConfigError: an edit that does not fit (checked for every edit before anything runs).
        CaptureError: a rank of a capture failed.
    """
    out_dir = Path(out_dir)
    edited_configs = [apply_capture_edit(config, edit) for edit in edits]
    baseline = capture(out_dir, config)
    results = []
    for i, (edit, edited_config) in enumerate(zip(edits, edited_configs, strict=True)):
        folder = f"{WHATIF_DIR}/{i}-{edit.kind}"
        logger.info("re-capturing with %s into %s", edit.kind, out_dir / folder)
        results.append(CaptureWhatIf(edit, folder, baseline, capture(out_dir / folder, edited_config)))
    write_whatif(out_dir, [r.to_json() for r in results])
    return results
