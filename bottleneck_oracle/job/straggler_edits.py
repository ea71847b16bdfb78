"""Edits of the edit language on a pipeline job's op table, each a replay of the job with new op times.

- ``fix straggler_rank rank=R [step=N]``: the workers of those global ranks as their stage's peers run
  (what if rank 37 were healthy); with no rank, every op at its type's typical time (no stragglers at all);
- ``scale``/``set``/``remove`` with ``rank=``, ``step=`` and ``name=`` (a regular expression on the op
  type, e.g. ``name=backward-compute``);
- ``move_layer A->B layers=L[,M]``: stage A's computes lose one of their L layers' share, stage B's gain one of
  its M (default L);
- ``even_microbatches``: every compute at its stage's typical time.
Several edits apply in order, each on the op times the previous one left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.job.straggler_verdict import interval_ns
from bottleneck_oracle.job.stragglers import Replayed, StragglerAnalysis, even_work, peer_own
from bottleneck_oracle.traces.op_table import COMPUTE, OPTYPES
from bottleneck_oracle.truth.edits import Edit, EditKind, format_edit
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["PipelineWhatIf", "pipeline_whatif", "recorded_ranks"]


@dataclass(frozen=True, slots=True)
class PipelineWhatIf:
    """The job replayed under ``edits``: its mean step time (ns) with an interval, against the recorded one."""

    edits: tuple[str, ...]
    after: Replayed
    before: Replayed  # recorded op times, launch gaps removed
    interval_ns: tuple[float, float]
    assumptions: tuple[str, ...]

    @property
    def saving_ns(self) -> float:
        return self.before.mean_ns - self.after.mean_ns


def recorded_ranks(a: StragglerAnalysis, edit: Edit) -> list[int]:
    """The recorded workers of the edit's ranks: a rank the table does not record stands for the recorded first
    rank of its tensor/sequence-parallel group (the study records rank 36 of AR's group 36..39).

    Raises:
        ConfigError: a rank outside every recorded worker's group.
    """
    layout, known = a.graph.table.layout, np.unique(a.graph.table.rank)
    group = layout.tp * layout.dsp
    out = []
    for rank in edit.select.ranks:
        first = known[np.searchsorted(known, rank, side="right") - 1] if rank >= known[0] else -1
        if first < 0 or rank >= first + group:
            raise ConfigError(f"edit {format_edit(edit)}: rank {rank} records no ops; the table's workers are "
                              f"ranks {', '.join(map(str, known[:12]))}{' ...' if len(known) > 12 else ''}")
        out.append(int(first))
    return out


def _selected(a: StragglerAnalysis, edit: Edit) -> np.ndarray:
    g, sel = a.graph, edit.select
    if sel.kind or sel.op or sel.streams:
        raise ConfigError(f"edit {format_edit(edit)}: an op table selects by rank=, step= and name= (an op type "
                          f"pattern such as name=backward-compute), not kind=, op= or stream=")
    picked = np.ones(g.instances, dtype=bool)
    if sel.ranks:
        picked &= np.isin(g.column(g.table.rank), recorded_ranks(a, edit))
    if sel.steps:
        missing = sorted(set(sel.steps) - set(g.steps.tolist()))
        if missing:
            raise ConfigError(f"edit {format_edit(edit)}: step {missing[0]} is not among the analysed steps "
                              f"{g.steps[0]}..{g.steps[-1]}")
        picked &= np.isin(np.repeat(g.steps, g.instances // len(g.steps)), sel.steps)
    if sel.name:
        hit = np.array([bool(re.search(sel.name, name)) for name in OPTYPES])
        if not hit.any():
            raise ConfigError(f"edit {format_edit(edit)}: name={sel.name} matches no op type ({', '.join(OPTYPES)})")
        picked &= hit[g.column(g.table.optype)]
    return picked


def _apply(a: StragglerAnalysis, edit: Edit, own: np.ndarray, ideal: np.ndarray) -> tuple[np.ndarray, str]:
    g = a.graph
    if edit.kind == EditKind.FIX:
        if edit.category != Bottleneck.STRAGGLER_RANK:
            raise ConfigError(f"edit {format_edit(edit)}: on a pipeline job only 'fix straggler_rank' applies")
        if not edit.select.ranks:  # no stragglers anywhere: the study's ideal
            return np.where(_selected(a, edit), ideal, own), "every op at its type's typical time (the ideal)"
        if g.table.layout.dp == 1:
            raise ConfigError(f"edit {format_edit(edit)}: each stage has one replica, so no worker to measure a "
                              f"healthy one by; try 'move_layer' or 'scale rank=R x2' instead")
        ranks = recorded_ranks(a, edit)
        workers = np.isin(g.column(g.table.rank), ranks)  # no measure of health in any step
        stands = [f"rank {r} as its group's recorded rank {f}" for r, f in zip(edit.select.ranks, ranks) if r != f]
        return np.where(_selected(a, edit), peer_own(g, a.recorded_own, workers), own), \
            "a healthy worker runs each op as the other workers of its stage do (their median)" + \
            (f"; {', '.join(stands)} (one rank of each tensor/sequence-parallel group is recorded)" if stands else "")
    if edit.kind in (EditKind.SCALE, EditKind.SET, EditKind.REMOVE):
        picked = _selected(a, edit)
        new = {EditKind.SCALE: np.rint(own / edit.factor), EditKind.SET: np.full(len(own), round(edit.ms * 1e6)),
               EditKind.REMOVE: np.zeros(len(own))}[edit.kind].astype(np.int64)
        return np.where(picked, new, own), "communication ops change by their transfer, waits replay"
    if edit.kind == EditKind.MOVE_LAYER:
        source, target = edit.stages[:2]
        held = (edit.value, *edit.stages[2:], edit.value)[1]  # the target's layers: given, else as the source's
        pp = g.table.layout.pp
        if max(source, target) >= pp:
            raise ConfigError(f"edit {format_edit(edit)}: the job has stages 0..{pp - 1}")
        stage, comp = g.column(g.table.stage), np.isin(g.column(g.table.optype), COMPUTE)
        factor = np.ones(len(own))
        factor[comp & (stage == source)] = (edit.value - 1) / edit.value
        factor[comp & (stage == target)] = (held + 1) / held
        return np.rint(own * factor).astype(np.int64), \
            f"a layer costs 1/{edit.value} of stage {source}'s computes and 1/{held} of stage {target}'s; the loss " \
            f"and embeddings stay"
    if edit.kind == EditKind.EVEN_MICROBATCHES:
        return even_work(g, own), "each compute takes its stage's mean for its kind (equal tokens per micro-batch)"
    raise ConfigError(f"edit {format_edit(edit)}: not an edit of a pipeline job's op times; use fix straggler_rank, "
                      f"scale/set/remove, move_layer or even_microbatches")


def pipeline_whatif(a: StragglerAnalysis, edits: list[Edit]) -> PipelineWhatIf:
    """The job of ``a`` replayed with ``edits`` applied in order.

    Raises:
        ConfigError: an edit that does not apply to an op table, or selects a rank or step it lacks.
    """
    g = a.graph
    own, ideal = a.recorded_own, a.ideal_own
    notes = []
    for edit in edits:
        own, note = _apply(a, edit, own, ideal)
        notes.append(note)
    after = Replayed(g.step_ns(g.replay(own)))
    return PipelineWhatIf(tuple(format_edit(e) for e in edits), after, a.no_gaps,
                          interval_ns(after, a.replay_residual), tuple(dict.fromkeys(notes)))
