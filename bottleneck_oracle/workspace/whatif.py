"""What-if and optimize as services: a trace resolved from the workspace, edits parsed, the graph
model loaded once per process, and the engine (``whatif/``) called."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb.playbook import read_playbook
from bottleneck_oracle.truth.edits import Edit, edit_type, parse_edit
from bottleneck_oracle.whatif.optimize import Plan, optimize
from bottleneck_oracle.whatif.predict import WhatIfPrediction, check_step, predict_whatif
from bottleneck_oracle.whatif.verify import verify_plan
from bottleneck_oracle.workspace.traces import open_trace

if TYPE_CHECKING:
    from bottleneck_oracle.gnn.predict import Predictor

__all__ = ["graph_model", "model_is_scored", "optimize_trace", "whatif_trace"]

_SHIPPED_CONFIG = Path(__file__).resolve().parents[1] / "gnn" / "checkpoint" / "config.json"


@functools.cache
def graph_model(checkpoint: Path | None = None) -> Predictor:
    """The graph model, loaded once per process (torch takes a second to import)."""
    from bottleneck_oracle.gnn.predict import Predictor

    return Predictor(checkpoint)


def model_is_scored(edits: Sequence[str | Edit]) -> bool:
    """Whether the shipped graph model has a recorded what-if score for these edits' one type: only
    then can its prediction be the one chosen (``whatif/predict.py``), so only then is it worth loading
    (torch takes seconds). Read from the checkpoint's config.json, without torch."""
    types = {edit_type(e if isinstance(e, Edit) else parse_edit(e)) for e in edits}
    try:
        metrics = json.loads(_SHIPPED_CONFIG.read_text()).get("metrics", {})
    except (OSError, ValueError):
        return False
    scored = metrics.get("splits", {}).get("test", {}).get("whatif", {})
    return len(types) == 1 and next(iter(types)) in scored


def whatif_trace(ref: str | Path | Sequence[Path], edits: Sequence[str | Edit], settings: Settings, *,
                 step: int | None = None, model: bool = True, partial: bool = False,
                 steps_from: str | None = None) -> WhatIfPrediction:
    """Predicts ``step`` (default: the one step the edits name, else the slowest) of the trace ``ref`` under
    ``edits``.

    Raises:
        ConfigError: a bad edit, a step the trace lacks, a trace that is not known.
        TraceFormatError: a file that is not a trace.
    """
    parsed = [e if isinstance(e, Edit) else parse_edit(e) for e in edits]  # a bad edit fails before any reading
    named = {s for e in parsed for s in e.select.steps}
    if step is None and len(named) == 1:  # `fix dataloader_stall step=6` asks about step 6, not the slowest
        step = named.pop()
    a = open_trace(ref, settings, partial=partial, steps_from=steps_from).analysis
    return predict_whatif(a, check_step(a, step), parsed, graph_model() if model else None)


def optimize_trace(ref: str | Path | Sequence[Path], settings: Settings, *, step: int | None = None,
                   budget: int = 3, verify: bool = False, model: bool = True, partial: bool = False,
                   steps_from: str | None = None, progress: Callable[[str, int, int], None] | None = None) -> Plan:
    """Ranks the changes for ``step`` (default: the slowest) of the trace ``ref`` and plans up to
    ``budget`` of them; with ``verify``, re-runs the job (synthetic or captured) after each.

    Args:
        progress: called with (what, done, total) while candidates are predicted and re-runs made.

    Raises:
        ConfigError: a step the trace lacks, a budget < 1, or ``verify`` on a trace with no manifest.
    """
    resolved = open_trace(ref, settings, partial=partial, steps_from=steps_from)
    a = resolved.analysis
    chosen = check_step(a, step)
    tell = progress or (lambda *_: None)
    plan = optimize(a, chosen, read_playbook(), graph_model() if model else None, budget=budget,
                    progress=lambda done, total: tell("predicting candidates", done, total))
    if not verify:
        return plan
    folder = Path(resolved.entry.paths[0])
    measured, note = verify_plan(folder if folder.is_dir() else folder.parent, plan.cumulative_edits(), chosen,
                                 workers=settings.workers, alternatives=plan.alternatives(),
                                 progress=lambda done, total: tell("re-running", done, total))
    return Plan(plan.step, plan.baseline_ms, plan.candidates, plan.plan, measured, note)
