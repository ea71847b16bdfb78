"""What-if ground truth: re-run the simulation with one change applied to the job itself.

Because the change is made to the simulated job (not replayed on a recorded graph), its
knock-on effects are included: a faster all-reduce also overlaps less with compute and so
interferes less, more micro-batches shrink the pipeline bubble, a larger data-parallel
group makes every gradient all-reduce slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.job import Tuning
from bottleneck_oracle.synth.schedule import SimResult, run
from bottleneck_oracle.synth.synthesize import SynthManifest, synthesize
from bottleneck_oracle.truth.edits import (
    Edit,
    EditKind,
    edit_to_json,
    step_rows,
    write_whatif,
)

__all__ = ["WhatIfResult", "apply_edit", "synthesize_with_whatifs", "whatif", "whatif_to_json"]


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    """Step times before and after one edit.

    Attributes:
        edit: the change.
        baseline: the job as configured.
        edited: the job with the change (its ranks differ after a data-parallel change).
    """

    edit: Edit
    baseline: SimResult
    edited: SimResult

    def baseline_ms(self) -> dict[tuple[int, int], float]:
        """(step, rank) → true step time of the job as configured."""
        return _by_step_rank(self.baseline)

    def edited_ms(self) -> dict[tuple[int, int], float]:
        """(step, rank) → true step time with the edit."""
        return _by_step_rank(self.edited)

    def speedup(self) -> float:
        """Mean job step time (slowest rank per step) before over after."""
        before = np.mean(list(self.baseline.job_step_ms().values()))
        after = np.mean(list(self.edited.job_step_ms().values()))
        return float(before / after)


def _by_step_rank(result: SimResult) -> dict[tuple[int, int], float]:
    return {(s, r): float(result.step_ms[r, i]) for i, s in enumerate(result.steps)
            for r in range(result.step_ms.shape[0])}


def apply_edit(config: SynthConfig, edit: Edit) -> tuple[SynthConfig, Tuning]:
    """The edited job and the speed-ups to simulate it with.

    Raises:
        ConfigError: the edit does not fit the job (an injection index out of range, a
            micro-batch that does not split, a data-parallel degree giving too many ranks).
    """
    if edit.kind == EditKind.COLLECTIVE_FASTER:
        return config, Tuning(collective_speedup=((edit.target, edit.factor),))
    if edit.kind == EditKind.KERNEL_FASTER:
        return config, Tuning(kernel_speedup=((edit.target, edit.factor),))
    if edit.kind == EditKind.DATA_PARALLEL:
        return config.with_changes(dp=edit.value), Tuning()
    if edit.kind == EditKind.REMOVE_INJECTION:
        if not 0 <= edit.value < len(config.injections):
            raise ConfigError(f"edit {edit.kind}: no injection {edit.value}; the job has {len(config.injections)}")
        kept = tuple(i for k, i in enumerate(config.injections) if k != edit.value)
        return config.with_changes(injections=kept), Tuning()
    factor = int(edit.factor)
    batch = config.batch
    if edit.keep_global_batch and batch % factor:
        raise ConfigError(f"edit {edit.kind}: a micro-batch of {batch} samples does not split by {factor}; "
                          "pass keep_global_batch=False")
    return config.with_changes(microbatches=config.microbatches * factor,
                               micro_batch=batch // factor if edit.keep_global_batch else batch), Tuning()


def whatif(config: SynthConfig, edit: Edit) -> WhatIfResult:
    """Simulates ``config`` as is and with ``edit``, interference and all.

    Example:
        ```python
        result = whatif(config, Edit.collective_faster("allreduce", 2.0))
        result.speedup()
        ```

    Raises:
        ConfigError: the edit does not fit the job.
    """
    edited_config, tuning = apply_edit(config, edit)
    baseline = run(config)[0]
    edited = run(edited_config, tuning)[0]
    return WhatIfResult(edit, baseline, edited)


def whatif_to_json(result: WhatIfResult) -> dict[str, object]:
    """One entry of a ``whatif.json``: the edit, the job's speed-up and its ``step_rows``."""
    return {"edit": edit_to_json(result.edit), "speedup": round(result.speedup(), 4),
            "step_ms": step_rows(result.baseline_ms(), result.edited_ms())}


def synthesize_with_whatifs(out_dir: Path, config: SynthConfig, edits: Sequence[Edit], *,
                            workers: int = 1) -> tuple[SynthManifest, list[WhatIfResult]]:
    """Writes the job's traces into ``out_dir`` and, with ``edits``, its ``whatif.json``: the true
    step times of the job re-simulated under each edit.

    Raises:
        ConfigError: an edit that does not fit the job (checked for every edit before anything runs).
    """
    for edit in edits:
        apply_edit(config, edit)
    manifest = synthesize(out_dir, config, workers=workers)
    results = [whatif(config, edit) for edit in edits]
    if results:
        write_whatif(out_dir, [whatif_to_json(result) for result in results])
    return manifest, results
