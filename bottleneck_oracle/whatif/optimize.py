"""What to change first: candidate edits from a step's findings and the playbook's remedies, each
predicted, ranked by the time it saves, and a plan that applies the best one and looks again.

A candidate is an edit (``fix CATEGORY`` for every finding of the step, and the edit of every
playbook remedy for those categories; on a GPU-bound step, the kernel-side remedies instead of the
host-side fixes). The loop applies the best candidate to the graph, moves
the trace's events to where the edited graph puts them and analyses it again (``replay/retime.py``),
so what the change exposes is found; it predicts every candidate on that job, old and new, and
stops when the next one would save less than ``MIN_GAIN`` of the step. Two candidates that
predict the same step time with the same critical path are one change seen twice (a straggler
whose lateness is a host pause): they merge, and the cause the analysis ranks first names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.errors import ConfigError, OracleError
from bottleneck_oracle.graphdb.playbook import PlaybookEntry
from bottleneck_oracle.replay.retime import edited_analysis
from bottleneck_oracle.truth.edits import Edit, EditKind, edit_to_json, edit_type, format_edit, parse_edit
from bottleneck_oracle.vocabulary import Bottleneck
from bottleneck_oracle.whatif._gpu import HOST_SIDE, gpu_bound_of
from bottleneck_oracle.whatif.predict import WhatIfPrediction, baseline_ms, predict_whatif, recorded_scores

if TYPE_CHECKING:
    from bottleneck_oracle.gnn.predict import Predictor

__all__ = ["MIN_GAIN", "Candidate", "Plan", "candidates", "optimize"]

MIN_GAIN = 0.01  # of the step's time: a change that saves less is not worth proposing


@dataclass(frozen=True, slots=True)
class Candidate:
    """One proposed change and what it is predicted to buy.

    Args:
        edit (Edit): the change.
        category (str): the bottleneck it addresses.
        remedies (tuple[str, ...]): playbook titles that make this change.
        evidence (str): the finding that motivates it.
        prediction (WhatIfPrediction | None): None when it could not be predicted (``error`` says why).
        confidence (float | None): 1 - the chosen predictor's recorded MAPE for this edit type (as a
            fraction), None when it was not scored.
        kernel_side (bool): a kernel-side remedy of a GPU-bound step (a faster kernel asked about), not
            the fix of a finding: its gain is what the change would buy, not a fault the trace shows.
    """

    edit: Edit
    category: str
    remedies: tuple[str, ...]
    evidence: str
    prediction: WhatIfPrediction | None = None
    confidence: float | None = None
    error: str = ""
    also: tuple[str, ...] = ()  # categories of candidates merged into this one
    kernel_side: bool = False

    @property
    def gain_ms(self) -> float:
        return self.prediction.gain_ms if self.prediction else -math.inf

    def explanation(self) -> str:
        if self.prediction is None:
            return f"{format_edit(self.edit)}: not predicted ({self.error})"
        p = self.prediction
        how = f"; remedies: {'; '.join(self.remedies)}" if self.remedies else ""
        also = f" (also explains {', '.join(self.also)})" if self.also else ""
        return (f"{format_edit(self.edit)} addresses {self.category}{also}: {self.evidence}. Predicted "
                f"{p.best_ms:.3f} ms against {p.baseline_ms:.3f} ms ({p.gain_ms:.3f} ms saved, {p.chosen}){how}")

    def to_json(self) -> dict[str, object]:
        p = self.prediction
        return {"edit": format_edit(self.edit), "category": self.category, "also": list(self.also),
                "predicted_ms": p.best_ms if p else None, "gain_ms": p.gain_ms if p else None,
                "predictor": p.chosen if p else None, "confidence": self.confidence,
                "remedies": list(self.remedies), "kernel_side": self.kernel_side, "explanation": self.explanation()}


@dataclass(frozen=True, slots=True)
class Plan:
    """Ranked candidates and the plan built from them.

    Args:
        step (int): the step optimized.
        baseline_ms (float): its recorded time.
        candidates (list[Candidate]): best first; those that could not be predicted last.
        plan (list[Candidate]): each entry a change, predicted with every change so far applied.
        verified (list[float | None]): the measured step time after each plan entry (``--verify``).
    """

    step: int
    baseline_ms: float
    candidates: list[Candidate]
    plan: list[Candidate]
    verified: list[float | None] = field(default_factory=list)
    verify_note: str = ""

    def cumulative_edits(self) -> list[tuple[Edit, ...]]:
        """Each plan entry's edits: every change so far."""
        return [c.prediction.edits for c in self.plan if c.prediction is not None]

    def alternatives(self) -> dict[Edit, tuple[Edit, ...]]:
        """For a merged fix, the fixes of the categories it also explains (the same change)."""
        return {c.edit: tuple(Edit(c.edit.kind, c.edit.select, category=other) for other in c.also)
                for c in self.plan if c.also and c.edit.kind == EditKind.FIX}

    def to_json(self) -> dict[str, object]:
        entries = []
        previous = self.baseline_ms
        for i, c in enumerate(self.plan):
            p = c.prediction
            assert p is not None
            entry = {"edit": format_edit(c.edit), "category": c.category, "edits": [edit_to_json(e) for e in p.edits],
                     "predicted_ms": p.best_ms, "gain_ms": round(previous - p.best_ms, 3), "predictor": p.chosen}
            if self.verified:
                measured = self.verified[i]
                entry["measured_ms"] = measured
                entry["error_pct"] = (round(100 * (p.best_ms - measured) / measured, 2) if measured else None)
            entries.append(entry)
            previous = p.best_ms
        out: dict[str, object] = {"step": self.step, "baseline_ms": self.baseline_ms,
                                  "candidates": [c.to_json() for c in self.candidates], "plan": entries}
        if self.verify_note:
            out["verify"] = self.verify_note
        return out


def _add(out: dict[str, Candidate], edit: Edit, category: str, title: str, evidence: str,
         kernel_side: bool = False) -> None:
    """``edit`` into ``out`` (once per edit; the playbook titles that make it gathered on it)."""
    key = format_edit(edit)
    if key not in out:
        out[key] = Candidate(edit, category, (), evidence, kernel_side=kernel_side)
    if title and title not in out[key].remedies:
        out[key] = replace(out[key], remedies=(*out[key].remedies, title))


def candidates(a: Analysis, step: int, playbook: tuple[PlaybookEntry, ...]) -> list[Candidate]:
    """The changes worth predicting for ``step``: a fix per finding of the step (and per chronic
    finding), and each playbook remedy of those categories that names an edit. On a GPU-bound step
    (its slowest rank's GPU busy most of the window) the host-side fixes give way to the playbook's
    kernel-side remedies (``slow_compute`` entries whose edit is a ``scale``)."""
    bound = gpu_bound_of(a, step)
    found = [f for f in a.findings if f.step in (step, None) and not (bound and f.category in HOST_SIDE)]
    out: dict[str, Candidate] = {}
    for f in found:
        category = str(f.category)
        edits = [(f"fix {category} step={step}" if f.step is not None else f"fix {category}", "")]
        edits += [(e.edit, e.title) for e in playbook if e.category == f.category and e.edit]
        for text, title in edits:
            try:
                edit = parse_edit(text.replace("{2m}", str(2 * _microbatches(a)))) if "{2m}" in text else \
                    parse_edit(text)
            except ConfigError:
                continue  # a remedy that does not apply here (micro-batches without a pipeline)
            if edit_type(edit) == f"fix:{category}":
                edit = parse_edit(f"fix {category} step={step}") if f.step is not None else edit
            _add(out, edit, category, title, f.evidence)
    if bound is not None:
        for e in playbook:
            if e.category == Bottleneck.SLOW_COMPUTE and e.edit.startswith("scale "):
                _add(out, parse_edit(e.edit), str(e.category), e.title, bound.evidence, kernel_side=True)
    return list(out.values())


def optimize(a: Analysis, step: int, playbook: tuple[PlaybookEntry, ...], predictor: Predictor | None = None,
             budget: int = 3, progress: Callable[[int, int], None] | None = None) -> Plan:
    """Ranks the candidates for ``step`` and builds a plan of at most ``budget`` changes.

    Args:
        progress: called with (done, total) as the candidates are predicted.

    Raises:
        ConfigError: budget < 1.
    """
    if budget < 1:
        raise ConfigError(f"optimize: the budget must be at least 1 change, got {budget}")
    base = baseline_ms(a, step)
    ranked = _merged(_ranked(_predict_all(a, step, candidates(a, step, playbook), predictor, progress)), a, step)
    plan: list[Candidate] = []
    applied: tuple[Edit, ...] = ()
    prefix: tuple[Edit, ...] = ()  # edits of the plan ``a`` does not hold yet (when it could not be re-analysed)
    current, pool = base, [c for c in ranked if c.prediction is not None]
    while pool and len(plan) < budget:
        best = pool[0]
        assert best.prediction is not None
        if current - best.prediction.best_ms < MIN_GAIN * base:
            break
        applied, current = (*applied, best.edit), best.prediction.best_ms
        plan.append(replace(best, prediction=replace(best.prediction, edits=applied)))
        if len(plan) == budget:
            break
        # the job with the change made, analysed again: what it exposes gets findings of its own
        try:
            a, prefix = edited_analysis(a, step, [*prefix, best.edit]), ()
        except OracleError:  # a retimed trace the analysis refuses (or a new schedule): predict on top instead
            prefix = (*prefix, best.edit)
        known = {str(c.edit) for c in pool[1:]}
        fresh = [c for c in candidates(a, step, playbook) if str(c.edit) not in known and c.edit not in applied]
        again = _predict_all(a, step, [*pool[1:], *fresh], predictor, progress, prefix)
        pool = [c for c in _merged(_ranked(again), a, step) if c.prediction is not None]
    return Plan(step, base, ranked, plan)


def _predict_all(a: Analysis, step: int, cs: list[Candidate], predictor: Predictor | None,
                 progress: Callable[[int, int], None] | None, prefix: tuple[Edit, ...] = ()) -> list[Candidate]:
    out = []
    for i, c in enumerate(cs):
        out.append(_predicted(a, step, c, prefix, predictor))
        if progress:
            progress(i + 1, len(cs))
    return out


def _predicted(a: Analysis, step: int, c: Candidate, applied: tuple[Edit, ...],
               predictor: Predictor | None) -> Candidate:
    try:
        p = predict_whatif(a, step, [*applied, c.edit], predictor)
    except ConfigError as e:
        return replace(c, prediction=None, confidence=None, error=str(e))
    return replace(c, prediction=p, confidence=_confidence(p, predictor), error="")


def _confidence(p: WhatIfPrediction, predictor: Predictor | None) -> float | None:
    if p.familiar is not None and not p.familiar.known:
        return None  # the recorded scores were measured on steps unlike this one
    types = {edit_type(e) for e in p.edits}
    scores = recorded_scores(predictor) if predictor is not None else {}
    if len(types) != 1 or (kind := types.pop()) not in scores or p.chosen not in scores[kind]:
        return None
    return round(max(0.0, 1 - scores[kind][p.chosen] / 100), 4)


def _ranked(cs: list[Candidate], cause: str = "") -> list[Candidate]:
    # stable: the step's cause, then the findings order, breaks ties
    return sorted(cs, key=lambda c: (-c.gain_ms, c.category != cause))


def _merged(cs: list[Candidate], a: Analysis, step: int) -> list[Candidate]:
    """Candidates with the same predicted time and critical path merged into the one whose finding the
    analysis ranks first (the step's cause, ``findings/cause.py``, before any other; a cause before the
    straggler it makes); and the fix of a straggler whose lateness a finding on its own rank and step
    explains merged into that cause's fix."""
    cause = a.cause(step)
    order = {str(f.category): i for i, f in reversed(list(enumerate(a.findings)))}
    if cause is not None:
        order[str(cause.category)] = -1
    explained = _explained_stragglers(a)
    out: list[Candidate] = []
    for c in cs:
        twin = next((o for o in out if _same(o, c)), None)
        if twin is None and c.prediction is not None:  # a straggler and what made it late: one change
            if c.category == Bottleneck.STRAGGLER_RANK:
                twin = next((o for o in out if o.category in explained and o.prediction is not None), None)
            elif c.category in explained:
                twin = next((o for o in out if o.category == Bottleneck.STRAGGLER_RANK and o.prediction), None)
        if twin is None:
            out.append(c)
            continue
        keep, drop = (c, twin) if order.get(c.category, 1 << 30) < order.get(twin.category, 1 << 30) else (twin, c)
        merged = Candidate(keep.edit, keep.category, tuple(dict.fromkeys(keep.remedies + drop.remedies)),
                           keep.evidence, keep.prediction, keep.confidence, keep.error,
                           tuple(dict.fromkeys((*keep.also, drop.category))), keep.kernel_side)
        out[out.index(twin)] = merged
    return _ranked(out, str(cause.category) if cause is not None else "")


def _explained_stragglers(a: Analysis) -> set[str]:
    """Categories of the findings that explain a straggler: on its late rank, in its step, and the
    causes that made other ranks wait (``findings/cause.py``)."""
    late = {(f.step, f.ranks) for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK}
    made_wait = lambda f: f.cause and f.waiting and f.category != Bottleneck.EXPOSED_COMMUNICATION  # noqa: E731
    return {str(f.category) for f in a.findings
            if f.category != Bottleneck.STRAGGLER_RANK and ((f.step, f.ranks) in late or made_wait(f))}


def _same(x: Candidate, y: Candidate) -> bool:
    if x.prediction is None or y.prediction is None or x.category == y.category:
        return False
    if min(x.prediction.gain_ms, y.prediction.gain_ms) < MIN_GAIN * x.prediction.baseline_ms:
        return False  # two changes that buy nothing are not one change
    px, py = x.prediction, y.prediction
    return (abs(px.best_ms - py.best_ms) <= 1e-3 * max(px.best_ms, 1e-9)
            and px.after is not None and py.after is not None and px.after.ops_ms == py.after.ops_ms)


def _microbatches(a: Analysis) -> int:
    from bottleneck_oracle.replay.structural import pipeline_microbatches

    return pipeline_microbatches(a)

