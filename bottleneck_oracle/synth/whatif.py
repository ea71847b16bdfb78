"""What-if ground truth: re-run the simulation with one change applied to the job itself.

Because the change is made to the simulated job (not replayed on a recorded graph), its
knock-on effects are included: a faster all-reduce also overlaps less with compute and so
interferes less, more micro-batches shrink the pipeline bubble, a larger data-parallel
group makes every gradient all-reduce slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.job import Tuning
from bottleneck_oracle.synth.schedule import SimResult, run
from bottleneck_oracle.synth.synthesize import SynthManifest, synthesize
from bottleneck_oracle.truth.edits import (
    COLLECTIVES,
    Edit,
    EditKind,
    Selector,
    edit_to_json,
    fixed_injections,
    step_rows,
    write_whatif,
)
from bottleneck_oracle.vocabulary import KernelClass

__all__ = ["WhatIfResult", "apply_edit", "apply_edits", "synthesize_with_whatifs", "whatif", "whatif_to_json"]


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

    The simulator changes the job itself, so it takes the edits a job can be given: an op class
    (a kernel class or a collective kind) made faster, a fault fixed or an injection removed,
    another data-parallel degree or micro-batch count.

    Raises:
        ConfigError: an edit the simulator cannot make (a selector other than one op class, a
            removal, an overlap) or one that does not fit the job (no injection of that category or
            index, a batch that does not split, too many ranks).
    """
    if edit.kind == EditKind.SCALE:
        op = edit.select.op
        if edit.select != Selector(op=op) or op not in tuple(KernelClass) + COLLECTIVES:
            raise ConfigError(f"edit {edit}: the simulator scales one kernel class ({', '.join(KernelClass)}) "
                              f"or collective kind ({', '.join(COLLECTIVES)}), selected by op= alone")
        if op in COLLECTIVES:
            return config, Tuning(collective_speedup=((op, edit.factor),))
        return config, Tuning(kernel_speedup=((op, edit.factor),))
    if edit.kind == EditKind.DATA_PARALLEL:
        if edit.global_batch_kept:
            raise ConfigError(f"edit {edit}: the simulator keeps the per-rank batch; drop global_batch")
        moved = tuple(replace(i, ranks=tuple(sorted({_same_place(config, r, edit.value) for r in i.ranks})))
                      for i in config.injections)
        return config.with_changes(dp=edit.value, injections=moved), Tuning()
    if edit.kind == EditKind.REMOVE_INJECTION:
        if not 0 <= edit.value < len(config.injections):
            raise ConfigError(f"edit {edit}: no injection {edit.value}; the job has {len(config.injections)}")
        kept = tuple(i for k, i in enumerate(config.injections) if k != edit.value)
        return config.with_changes(injections=kept), Tuning()
    if edit.kind == EditKind.FIX:
        return config.with_changes(injections=fixed_injections(config.injections, edit)), Tuning()
    if edit.kind == EditKind.MICROBATCHES:
        samples = config.batch * config.microbatches
        if edit.global_batch_kept and samples % edit.value:
            raise ConfigError(f"edit {edit}: a global batch of {samples} samples does not split into "
                              f"{edit.value} micro-batches; add same_microbatch")
        return config.with_changes(microbatches=edit.value,
                                   micro_batch=samples // edit.value if edit.global_batch_kept else config.batch), \
            Tuning()
    raise ConfigError(f"edit {edit}: the simulator cannot make it (it changes the job, not the recorded graph)")


def apply_edits(config: SynthConfig, edits: Sequence[Edit]) -> tuple[SynthConfig, Tuning]:
    """``apply_edit`` of each edit in turn: the job with all of them, and their speed-ups together
    (two speed-ups of one kind multiply).

    Raises:
        ConfigError: an edit the simulator cannot make, or one that does not fit the job.
    """
    collective: dict[str, float] = {}
    kernel: dict[str, float] = {}
    for edit in edits:
        config, tuning = apply_edit(config, edit)
        for kind, factor in tuning.collective_speedup:
            collective[kind] = collective.get(kind, 1.0) * factor
        for kind, factor in tuning.kernel_speedup:
            kernel[kind] = kernel.get(kind, 1.0) * factor
    return config, Tuning(tuple(collective.items()), tuple(kernel.items()))


def _same_place(config: SynthConfig, rank: int, dp: int) -> int:
    """The rank at ``dp`` replicas with the same stage, replica (modulo ``dp``) and tensor-parallel
    index as ``rank``: a fault stays where it was in the pipeline (Megatron order)."""
    stage, within = divmod(rank, config.dp * config.tp)
    replica, tp_index = divmod(within, config.tp)
    return stage * dp * config.tp + (replica % dp) * config.tp + tp_index


def whatif(config: SynthConfig, edit: Edit) -> WhatIfResult:
    """Simulates ``config`` as is and with ``edit``, interference and all.

    Example:
        ```python
        result = whatif(config, Edit.scale(2.0, op="allreduce"))
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
