"""How right the what-if predictors are: each edit a synthetic job can be given, predicted by every
predictor and measured on the job simulated again, per edit type.

The measurement is the re-run's traces analysed by the same code that made the prediction, so a
prediction and its truth use one ruler (``whatif/verify.py``). This is what the README's table and
the evaluation harness's what-if suite report. ``real_pairs`` holds the replay to real jobs recorded
twice (``tests/data``), the pairs ``whatif/calibration.py`` draws its intervals from.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.analysis.diff import steady_steps
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.synthesize import synthesize
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import WHATIF_NAME, Edit, EditKind, edit_from_json, edit_type
from bottleneck_oracle.whatif.predict import check_step, predict_whatif
from bottleneck_oracle.whatif.verify import rerun_step_ms

if TYPE_CHECKING:
    from bottleneck_oracle.gnn.predict import Predictor

__all__ = ["FAULT_JOBS", "RealPair", "Score", "job_edits", "mape_table", "pair_folders", "real_pairs", "score_job",
           "score_jobs"]

_TINY = {"model": "tiny", "dp": 4, "steps": 4}
_GPT2 = {"model": "gpt2-small", "dp": 4, "steps": 4}
# One job per injectable category, the fault in step 2 and big enough for its detector to see: the
# fix of every category, scored on its own (the corpus's faults are often too small to be found).
FAULT_JOBS: dict[str, tuple[str, dict[str, object]]] = {
    "host_pause": ("host_pause@2:1=30", _TINY),
    "straggler_rank": ("straggler_rank@2:3=30", _TINY),
    "dataloader_stall": ("dataloader_stall@2:0=30", _TINY),
    "checkpoint_stall": ("checkpoint_stall@2=64", _TINY),
    "host_sync": ("host_sync@2:1=20", _TINY),
    "launch_overhead": ("launch_overhead@2:1=4x", _TINY),
    "pipeline_bubble": ("pipeline_bubble@2=30", {"model": "tiny", "pp": 2, "microbatches": 4, "steps": 4}),
    "slow_compute": ("slow_compute@2:1=3x", _GPT2),
    "exposed_communication": ("exposed_communication@2=4096", _GPT2),
}


@dataclass(frozen=True, slots=True)
class Score:
    """One prediction against its truth."""

    job: str
    edit: str
    edit_type: str
    step: int
    baseline_ms: float
    measured_ms: float
    predicted_ms: dict[str, float]
    chosen: str
    skipped: str = ""  # why nothing was predicted (the fault was not detected, the trace cannot support it)
    interval_ms: tuple[float, float] | None = None  # the chosen prediction's interval (``whatif/calibration.py``)

    @property
    def covered(self) -> bool | None:
        """Whether the measured time lies in the interval (None: no interval)."""
        return None if self.interval_ms is None else self.interval_ms[0] <= self.measured_ms <= self.interval_ms[1]

    def error_pct(self, predictor: str) -> float:
        """Signed error of ``predictor`` in % of the measured time (NaN when it did not predict)."""
        value = self.predicted_ms.get(predictor, float("nan"))
        return 100.0 * (value - self.measured_ms) / self.measured_ms


def job_edits(config: SynthConfig) -> list[Edit]:
    """The edits worth scoring on ``config``: its kernel classes and collectives twice as fast, each
    injected fault fixed, twice the data-parallel degree and twice the micro-batches where they apply."""
    edits = [Edit.scale(2.0, op="gemm"), Edit.scale(2.0, op="attention")]
    if config.dp > 1 or config.tp > 1:
        edits.append(Edit.scale(2.0, op="allreduce"))
    if config.pp > 1:
        edits.append(Edit.scale(2.0, op="sendrecv"))
    edits += [Edit.fix(i.category, i.step) for i in config.injections]
    if config.dp > 1:
        edits.append(Edit.data_parallel(2 * config.dp))
    samples = config.batch * config.microbatches
    if config.pp > 1 and not config.interleave and samples % (2 * config.microbatches) == 0:
        edits.append(Edit.microbatches(2 * config.microbatches))
    return edits


def score_job(folder: Path, a: Analysis, config: SynthConfig, predictor: Predictor | None = None,
              edits: Iterable[Edit] | None = None, job: str = "") -> list[Score]:
    """Every edit of ``job_edits(config)`` (or ``edits``) on the job in ``folder``, predicted and re-run.

    A fix is scored on its fault's step, any other edit on the slowest step. An edit the trace
    cannot support (a fix of a fault no detector found, a data-parallel change of a job without
    gradient collectives) is kept with the reason in ``skipped``.
    """
    out = []
    for edit in edits if edits is not None else job_edits(config):
        step = edit.select.steps[0] if edit.select.steps else check_step(a, None)
        measured = rerun_step_ms(folder, [edit], step)
        try:
            found = any(f.category == edit.category and f.step == step for f in a.findings)
            if edit.kind == EditKind.FIX and not found:
                # the truth removes the injected fault; a chronic finding of the category is another thing
                raise ConfigError(f"edit {edit}: no detector found the fault in step {step}")
            p = predict_whatif(a, step, [edit], predictor)
        except ConfigError as e:
            out.append(Score(job or folder.name, str(edit), edit_type(edit), step, float("nan"), measured, {}, "",
                             str(e)))
            continue
        out.append(Score(job or folder.name, str(edit), edit_type(edit), step, p.baseline_ms, measured,
                         dict(p.predicted_ms), p.chosen))
    return out


def score_jobs(jobs: Iterable[tuple[str, SynthConfig]], predictor: Predictor | None = None, only: str = "",
               progress: Callable[[int, str], None] | None = None) -> list[Score]:
    """Synthesizes each (name, config) job in a temporary folder and scores its edits (only those of
    edit type or kind ``only`` when given)."""
    out: list[Score] = []
    for i, (name, config) in enumerate(jobs):
        edits = [e for e in job_edits(config) if not only or only in (edit_type(e), str(e.kind))]
        with tempfile.TemporaryDirectory(prefix="oracle-accuracy-") as tmp:
            if not edits:
                continue
            synthesize(Path(tmp), config, workers=1)
            out += score_job(Path(tmp), analyze(read_trace(Path(tmp))), config, predictor, edits, job=name)
        if progress:
            progress(i + 1, name)
    return out


def mape_table(scores: Iterable[Score]) -> dict[str, dict[str, float]]:
    """Edit type → predictor → mean absolute error in % of the measured step (``chosen``: the one each
    prediction picked), with ``n`` the predictions and ``skipped`` the edits nothing predicted."""
    errors: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    skipped: dict[str, int] = defaultdict(int)
    for s in scores:
        kind = "fix" if s.edit_type.startswith("fix:") else s.edit_type
        for bucket in {kind, s.edit_type}:
            if s.skipped:
                skipped[bucket] += 1
                errors[bucket]  # the type is listed even when nothing of it was predicted
                continue
            for name in (*s.predicted_ms, "chosen"):
                errors[bucket][name].append(abs(s.error_pct(s.chosen if name == "chosen" else name)))
    return {kind: {**{name: round(float(np.mean(v)), 3) for name, v in by.items()}, "n": len(by.get("chosen", [])),
                   "skipped": skipped[kind]} for kind, by in sorted(errors.items())}


@dataclass(frozen=True, slots=True)
class RealPair:
    """A real job recorded, changed and recorded again (``whatif.json``, see ``real_pairs``), and the replay's
    prediction of the changed step.

    Args:
        name (str): the pair's folder (relative to the root it was found under, else its name).
        edit (Edit): the change, naming the step it changed.
        step (int): the step it changed.
        recorded_ms, predicted_ms, measured_ms (float): the step's time before, as the replay predicts it
            after, and as the re-run measured it after (each its slowest rank; a separate re-run: the median
            of its steady steps).
        traces (Path): the folder of the traces the replay read (the run before the change).
    """

    name: str
    edit: Edit
    step: int
    recorded_ms: float
    predicted_ms: float
    measured_ms: float
    traces: Path


def _median_steady_step(a: Analysis, folder: Path) -> int:
    """The run's median steady step: its steady steps by time, the middle one (of two, the slower, as
    ``oracle diff`` picks its median step)."""
    steady = steady_steps(a)
    if not steady.steady:
        raise ConfigError(f"{folder}: no steady step to edit")
    return sorted(steady.steady, key=lambda s: steady.walls[s][0])[len(steady.steady) // 2]


def _steady_median_ms(folder: Path) -> float:
    """The median time of the steady steps of the run in ``folder`` (ms)."""
    steady = steady_steps(analyze(read_trace(folder)))
    if not steady.steady:
        raise ConfigError(f"{folder}: no steady step to measure")
    return round(float(np.median(steady.steady_ms)), 3)


def _slowest_rank_ms(step_ms: list[list[Any]]) -> dict[int, float]:
    """Step -> the re-run's time of it, its slowest rank (``step_ms`` rows [step, rank, before, after])."""
    after: dict[int, float] = defaultdict(float)
    for step, _, _, ms in step_ms:
        after[step] = max(after[step], ms or 0.0)
    return after


def pair_folders(root: Path) -> list[Path]:
    """The folders one or two levels under ``root`` that hold a ``whatif.json``, sorted."""
    return sorted(p.parent for p in [*root.glob(f"*/{WHATIF_NAME}"), *root.glob(f"*/*/{WHATIF_NAME}")])


def real_pairs(folders: Iterable[Path], root: Path | None = None) -> list[RealPair]:
    """The replay against every real re-run in ``folders`` (those holding a ``whatif.json``); an edit the
    replay cannot predict from the trace (an injection removed by name) is left out.

    An entry of ``whatif.json`` is one of two kinds:

    - ``{"edit", "step_ms": [[step, rank, before_ms, after_ms], ...]}``: the job re-run in process, step for
      step; the traces before lie beside ``whatif.json``, the edit's step is predicted (none named: the
      slowest) and measured in the re-run.
    - ``{"edit", "before": FOLDER, "rerun": FOLDER}``: two separate runs (subfolders of the pair's folder)
      whose steps do not correspond; the before run's median steady step (``analysis.diff.steady_steps``;
      the edit's own step if it names one) is predicted and measured against the median of the re-run's
      steady steps.

    Args:
        root: names pairs by their path under it (default: by folder name).

    Raises:
        ConfigError: a separate run without a steady step.
    """
    out = []
    for folder in folders:
        name = folder.relative_to(root).as_posix() if root is not None else folder.name
        runs: dict[Path, Analysis] = {}
        for entry in json.loads((folder / WHATIF_NAME).read_text())["edits"]:
            edit = edit_from_json(entry["edit"])
            traces = folder / entry.get("before", "")
            if traces not in runs:
                runs[traces] = analyze(read_trace(traces))
            a = runs[traces]
            step = edit.select.steps[0] if edit.select.steps else None
            if "rerun" in entry:
                step = step if step is not None else _median_steady_step(a, traces)
                edit = replace(edit, select=replace(edit.select, steps=(step,)))
                measured = {step: _steady_median_ms(folder / entry["rerun"])}
            else:
                measured = _slowest_rank_ms(entry["step_ms"])
            try:
                step = check_step(a, step)
                p = predict_whatif(a, step, [edit])
            except ConfigError:
                continue
            out.append(RealPair(name, edit, step, p.baseline_ms, p.predicted_ms["replay"], measured[step], traces))
    return out
