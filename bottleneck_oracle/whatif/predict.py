"""What a step would take under edits: each predictor's answer, the one to trust and why, and the
critical path that results.

Predictors:
    ``replay``: the edited DAG replayed (longest path over the new weights): exact where nothing
        interferes, since the DAG reproduces the trace to the nanosecond.
    ``gnn_replay``: the replay corrected by the graph model for the compute/communication
        interference the edit changes (``replay/interference.py``).
    ``gnn``: the graph model's own step time for the edited graph.
    ``schedule``: for ``microbatches``, the 1F1B schedule re-instantiated from the trace's stages.

The choice follows the checkpoint's recorded held-out scores for the edit's type; without a
score for it, the replay (the one predictor that needs no training to be right on the DAG).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.graph.critical_path import StepReport, replayed_report
from bottleneck_oracle.graph.longest_path import longest_path
from bottleneck_oracle.graph.types import CATEGORIES, Category
from bottleneck_oracle.replay.compile import Compiled, compile_edits
from bottleneck_oracle.replay.engine import gpu_end_points, step_weights, weights_with
from bottleneck_oracle.truth.edits import Edit, EditKind, edit_to_json, edit_type
from bottleneck_oracle.whatif._gpu import gpu_busy_ms, is_host_side
from bottleneck_oracle.whatif.calibration import Interval, interval_for, load_ratios

if TYPE_CHECKING:
    from bottleneck_oracle.gnn.familiar import Familiarity
    from bottleneck_oracle.gnn.predict import Predictor

__all__ = ["PathSummary", "WhatIfPrediction", "baseline_ms", "check_step", "predict_whatif", "recorded_scores"]

TOP = 10  # ops listed per path


@dataclass(frozen=True, slots=True)
class PathSummary:
    """A critical path in a few numbers: its rank, breakdown and largest ops.

    Args:
        rank (int): whose step it is.
        wall_ms (float): the step's wall time on that rank.
        breakdown_ms (dict[str, float]): per category; sums to ``wall_ms``.
        ops_ms (dict[str, float]): critical time per op name (idle gaps as ``(idle)``), largest first.
        nodes (tuple[int, ...]): the graph nodes of the path in path order (``StepReport.path_nodes``).
    """

    rank: int
    wall_ms: float
    breakdown_ms: dict[str, float]
    ops_ms: dict[str, float]
    nodes: tuple[int, ...] = ()

    def to_json(self, top: int = TOP) -> dict[str, object]:
        return {"rank": self.rank, "wall_ms": self.wall_ms, "breakdown_ms": self.breakdown_ms,
                "top_contributors": [{"op": k, "ms": v} for k, v in list(self.ops_ms.items())[:top]]}


@dataclass(frozen=True, slots=True)
class WhatIfPrediction:
    """One step under edits.

    Args:
        step (int): the ProfilerStep.
        baseline_ms (float): its recorded wall time (slowest complete rank).
        edits (tuple[Edit, ...]): what changed.
        predicted_ms (dict[str, float]): predictor → predicted wall time of the step.
        chosen (str): the predictor to trust for these edits.
        why (str): the reason, with the recorded scores it rests on.
        assumptions (tuple[str, ...]): what the edits' compilation takes for granted.
        before (PathSummary): the recorded critical path of the slowest rank.
        after (PathSummary | None): the replayed one (None for a schedule prediction).
        interval (Interval | None): where the chosen prediction's step would land, and what set its width
            (``whatif/calibration.py``).
        familiar (Familiarity | None): how near the step lies to the graph model's training steps; beyond
            its threshold the model abstains (None: the model was not asked).
    """

    step: int
    baseline_ms: float
    edits: tuple[Edit, ...]
    predicted_ms: dict[str, float]
    chosen: str
    why: str
    assumptions: tuple[str, ...]
    before: PathSummary
    after: PathSummary | None
    interval: Interval | None = None
    familiar: Familiarity | None = None

    @property
    def best_ms(self) -> float:
        """The chosen predictor's answer."""
        return self.predicted_ms[self.chosen]

    @property
    def gain_ms(self) -> float:
        return round(self.baseline_ms - self.best_ms, 3)

    def moved(self) -> dict[str, object]:
        """What changed on the slowest rank's critical path: ops that entered or left it (gaps as
        ``(idle)``), and the ms per category and per op that moved most."""
        if self.after is None:
            return {}
        before, after = self.before.ops_ms, self.after.ops_ms
        delta = {op: round(after.get(op, 0.0) - before.get(op, 0.0), 3) for op in before.keys() | after.keys()}
        # ties by name: a set's order changes from one process to the next
        shifted = sorted((op for op in delta if abs(delta[op]) >= 1e-3), key=lambda op: (-abs(delta[op]), op))
        return {
            "entered": [{"op": op, "ms": after[op]} for op in after if op not in before][:TOP],
            "left": [{"op": op, "ms": before[op]} for op in before if op not in after][:TOP],
            "changed": [{"op": op, "delta_ms": delta[op]} for op in shifted[:TOP]],
            "breakdown_delta_ms": {c: round(self.after.breakdown_ms[c] - self.before.breakdown_ms[c], 3)
                                   for c in self.before.breakdown_ms
                                   if abs(self.after.breakdown_ms[c] - self.before.breakdown_ms[c]) >= 1e-3},
        }

    def to_json(self) -> dict[str, object]:
        """``{"step", "baseline_ms", "edits", "predicted_ms", "chosen", "why", "assumptions",
        "critical_path", "new_critical_path", "moved", "interval_ms", "interval_from", "model_familiarity"}``."""
        return {"step": self.step, "baseline_ms": self.baseline_ms, "edits": [edit_to_json(e) for e in self.edits],
                "predicted_ms": self.predicted_ms, "chosen": self.chosen, "why": self.why,
                "assumptions": list(self.assumptions), "critical_path": self.before.to_json(),
                "new_critical_path": self.after.to_json() if self.after else None, "moved": self.moved(),
                **self.interval_json(), "model_familiarity": self.familiar.to_json() if self.familiar else None}

    def interval_json(self) -> dict[str, object]:
        """``{"interval_ms": [lo, hi] | None, "interval_from": [...]}``, as ``--json`` and the agent's tool give it."""
        return self.interval.to_json() if self.interval else {"interval_ms": None, "interval_from": []}


def check_step(a: Analysis, step: int | None) -> int:
    """``step`` when the analysis has it complete on some rank, else the slowest step (``None``).

    Raises:
        NotFoundError: a step the trace does not have (the message lists those it has).
    """
    complete = sorted({r.step for r in a.steps if (r.step, r.rank) not in a.partial_steps})
    if not complete:
        raise ConfigError("the trace has no complete step to predict")
    if step is None:
        return a.slow_steps[0].step if a.slow_steps else max(complete, key=lambda s: baseline_ms(a, s))
    if step not in complete:
        raise NotFoundError(f"step {step}: no such complete step in the trace; its steps are "
                          f"{', '.join(map(str, complete))}")
    return step


def baseline_ms(a: Analysis, step: int) -> float:
    """The recorded wall time of ``step``: its slowest complete rank."""
    return round(max(r.wall_ns for r in _complete(a, step)) / 1e6, 3)


def predict_whatif(a: Analysis, step: int, edits: Sequence[Edit],
                   predictor: Predictor | None = None) -> WhatIfPrediction:
    """Predicts ``step`` of ``a`` under ``edits`` with every predictor that applies, and picks one.

    Raises:
        ConfigError: a bad edit for this trace (a selector that picks nothing, a fix without its
            finding, a structural edit the trace cannot support).
    """
    edits = tuple(edits)
    if not edits:
        raise ConfigError("whatif: give at least one edit")
    slowest = max(_complete(a, step), key=lambda r: r.wall_ns)
    before = _summary(a, slowest)
    if any(e.kind == EditKind.OVERLAP for e in edits):
        raise ConfigError("edit overlap: rewiring communication to overlap compute is not predicted yet (the "
                          "trace does not say when each gradient is ready); fix exposed_communication bounds its gain")
    if any(e.kind == EditKind.REMOVE_INJECTION for e in edits):
        raise ConfigError("edit remove_injection: names an injection of a recorded job; on a trace use "
                          "fix CATEGORY")
    if any(e.kind == EditKind.MICROBATCHES for e in edits):
        return _rescheduled(a, step, edits, before)
    compiled = compile_edits(a, list(edits), step)
    weight = weights_with(a.points, compiled.speedup, compiled.edge_scale, compiled.cut)
    # the step's own work edited, from where it began: faster work never makes it longer (replay/engine.py)
    t, pred = longest_path(a.points.index, step_weights(a, weight, step))
    ends = gpu_end_points(a)
    after_reports = [replayed_report(a.points, r, t, pred, ends.get((r.step, r.rank))) for r in _complete(a, step)]
    after_slowest = max(after_reports, key=lambda r: r.wall_ns)
    predicted = {"replay": round(after_slowest.wall_ns / 1e6, 3)}
    # the graph model learned speed-ups and removals: a slow-down (a slower network) is out of what it saw
    slower = bool((compiled.speedup < 1.0).any())
    models = predictor.predict(a, steps=(step,), speedup=compiled.speedup, weight=None if compiled.nodes_only
                               else weight) if predictor is not None and not slower else []
    familiar = models[0].familiar if models else None
    for model in models if familiar is not None and familiar.known else ():  # none for a step it does not take
        predicted["gnn_replay"] = round(predicted["replay"] + model.interference_ms, 3)
        if compiled.nodes_only:  # the model sees node edits; a gap or a transfer rescaled it cannot see
            predicted["gnn"] = round(model.step_ms, 3)
    chosen, why = _choose(edits, predicted, predictor if len(predicted) > 1 else None)
    if models and len(predicted) == 1:
        why = _abstains(familiar)
    if slower and predictor is not None:
        why = ("a slow-down: the graph model learned speed-ups and removals only; replay of the edited DAG, which "
               "reproduces the recorded step exactly, misses only interference the edit changes")
    predicted, assumptions = _at_least_gpu_busy(a, step, edits, predicted, compiled.assumptions)
    baseline = baseline_ms(a, step)
    interval = interval_for(a, step, after_slowest.rank, edits, baseline, predicted[chosen],
                            _most_saved_ms(a, step, compiled), load_ratios())
    return WhatIfPrediction(step, baseline, edits, predicted, chosen, why, assumptions,
                            before, _summary(a, after_slowest), interval, familiar)


def _abstains(familiar: Familiarity | None) -> str:
    if familiar is None:
        return ("the graph model abstains: its checkpoint keeps no training steps to tell whether this step is "
                "like them; replay of the edited DAG")
    return (f"the graph model abstains: this step lies {familiar.distance:.1f} from the nearest step it was trained "
            f"on, beyond the {familiar.threshold:.1f} within which its recorded scores hold (gnn/familiar.py); "
            "replay of the edited DAG, which reproduces the recorded step exactly")


def _most_saved_ms(a: Analysis, step: int, compiled: Compiled) -> float | None:
    """The most a pure speed-up can save ``step``: its edited work's own time times (1 - 1/K), every rank;
    None for edits that are no pure speed-up (a slow-down, a rescaled gap or transfer, a cut wait)."""
    if not compiled.nodes_only or (compiled.speedup < 1.0).any():
        return None
    mine = (a.graph.step == step) & (compiled.speedup > 1.0)
    return float((a.graph.dur_ns[mine] * (1.0 - 1.0 / compiled.speedup[mine])).sum()) / 1e6


def _at_least_gpu_busy(a: Analysis, step: int, edits: tuple[Edit, ...], predicted: dict[str, float],
                       assumptions: tuple[str, ...]) -> tuple[dict[str, float], tuple[str, ...]]:
    """A host-side fix's predictions floored at the step's GPU busy time: a faster host cannot save
    time the GPU was busy (``graph/gpu_timeline.py``)."""
    busy = gpu_busy_ms(a, step) if is_host_side(edits) else None
    if busy is None or all(v >= busy for v in predicted.values()):
        return predicted, assumptions
    note = (f"a host-side fix: no prediction below the {busy} ms the GPU was busy in the step (a faster "
            "host cannot save time the GPU was busy)")
    return {k: max(v, busy) for k, v in predicted.items()}, (*assumptions, note)


def _rescheduled(a: Analysis, step: int, edits: tuple[Edit, ...], before: PathSummary) -> WhatIfPrediction:
    from bottleneck_oracle.replay.structural import microbatches

    if len(edits) > 1:
        raise ConfigError("edit microbatches: predicted on its own; give it without other edits")
    (edit,) = edits
    result = microbatches(a, edit.value, keep_global_batch=edit.global_batch_kept)
    if step not in result.step_ms:
        raise ConfigError(f"edit {edit}: step {step} is not a complete pipeline step of the trace")
    why = "micro-batches change the schedule itself: the 1F1B schedule re-instantiated from the trace's stages"
    baseline, predicted = baseline_ms(a, step), round(result.step_ms[step], 3)
    interval = interval_for(a, step, before.rank, edits, baseline, predicted, None, load_ratios())
    return WhatIfPrediction(step, baseline, edits, {"schedule": predicted}, "schedule", why, result.assumptions,
                            before, None, interval)


def _choose(edits: tuple[Edit, ...], predicted: dict[str, float], predictor: Predictor | None) -> tuple[str, str]:
    if predictor is None:
        return "replay", "the graph model was not loaded or takes no such step; replay of the edited DAG"
    types = {edit_type(e) for e in edits}
    scores = recorded_scores(predictor)
    if len(types) == 1 and (kind := types.pop()) in scores:
        mape = scores[kind]
        best = min((p for p in predicted if p in mape), key=lambda p: mape[p], default="replay")
        shown = ", ".join(f"{p} {mape[p]:.2f}%" for p in sorted(mape, key=mape.get) if p in predicted)  # type: ignore[arg-type]
        return best, f"lowest recorded what-if MAPE for {kind} edits on held-out jobs: {shown}"
    kinds = ", ".join(sorted({edit_type(e) for e in edits}))
    return "replay", (f"the graph model has no recorded score for {kinds}; replay of the edited DAG, which "
                      "reproduces the recorded step exactly, misses only interference the edit changes")


def recorded_scores(predictor: Predictor) -> dict[str, dict[str, float]]:
    """Edit type → predictor → the test split's recorded what-if MAPE (%)."""
    splits = predictor.checkpoint.metrics.get("splits", {})
    test = splits.get("test", {}) if isinstance(splits, dict) else {}
    whatif = test.get("whatif", {}) if isinstance(test, dict) else {}
    return {kind: {p: float(v) for p, v in scores.items() if p in ("replay", "gnn_replay", "gnn") and v == v}
            for kind, scores in whatif.items() if isinstance(scores, dict)}


def _complete(a: Analysis, step: int) -> list[StepReport]:
    return [r for r in a.steps if r.step == step and (r.step, r.rank) not in a.partial_steps]


def _summary(a: Analysis, r: StepReport) -> PathSummary:
    names = a.graph.trace.strings
    ops: dict[str, float] = defaultdict(float)
    idle = CATEGORIES.index(Category.IDLE)
    for node, cat, dur in zip(r.path_node.tolist(), r.path_category.tolist(), r.path_dur_ns.tolist()):
        # an idle gap belongs to the range open around it (a ProfilerStep): it is no op's time
        ops[names[a.graph.name[node]] if node >= 0 and cat != idle else "(idle)"] += dur / 1e6
    ranked = dict(sorted(((k, round(v, 3)) for k, v in ops.items() if v >= 5e-4), key=lambda kv: -kv[1]))
    breakdown = {str(c): round(r.breakdown_ns[c] / 1e6, 3) for c in CATEGORIES}
    return PathSummary(r.rank, round(r.wall_ns / 1e6, 3), breakdown, ranked, tuple(r.path_nodes().tolist()))

