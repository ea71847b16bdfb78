"""Stragglers of a pipeline-parallel job: how much faster it would run if no op were slower than typical,
and who holds it back. The what-if analysis of "Understanding Stragglers in Large Model Training Using
What-if Analysis" (ByteDance Seed), on the project's own replay of the job's point graph.

- The slowdown S is the mean step time replayed with the recorded durations (launch gaps removed) over
  the mean step time replayed with every op at the typical duration of its type: the mean for compute,
  the median for communication (whose recorded time holds waits).
- S is attributed to a group of ops (a data-parallel rank, a stage, an op type) by replaying the ideal
  job with only that group's ops at their recorded durations.
- Two shares name the cause: of the gap between recorded and ideal, how much goes when the few workers
  that score highest (``min`` of their replica's and stage's attribution) turn typical (``worker_share``,
  M_W), and when the last stage does (``stage_share``, M_S). Two more are ours: when the stage that
  holds the job back most turns typical (``worst_stage_share``; the last stage in the study's jobs), and
  when every compute takes its stage's typical time (``work_share``): uneven work across micro-batches
  and replicas, as uneven sequence lengths make it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bottleneck_oracle.executor import Executor, LocalExecutor
from bottleneck_oracle.graph.pipeline import JobGraph
from bottleneck_oracle.traces.op_table import COMPUTE, OPCODE, OPTYPES

__all__ = ["Replayed", "Share", "StragglerAnalysis", "analyze_stragglers", "attribute", "balance_stages", "even_work",
           "op_type_names", "peer_own", "typical_own", "WORKER_FRACTION"]

WORKER_FRACTION = 0.03  # the share of workers M_W puts back to typical (the study's 3%, at least one)
STANDS_OUT = 0.5  # a culprit's excess score is at least half the worst one's
# op types timed by their typical mean (work); the rest by their median (their time holds waits)
_BY_MEAN = np.isin(np.arange(len(OPTYPES)), (*COMPUTE, OPCODE["optimizer"], OPCODE["gc"]))
_PP_COMM = {OPCODE["forward-send"]: "forward-pp-comm", OPCODE["forward-recv"]: "forward-pp-comm",
            OPCODE["backward-send"]: "backward-pp-comm", OPCODE["backward-recv"]: "backward-pp-comm"}


@dataclass(frozen=True, slots=True)
class Replayed:
    """Step times of one replay: per kept step (ns) and their mean."""

    step_ns: np.ndarray

    @property
    def mean_ns(self) -> float:
        return float(self.step_ns.mean())


@dataclass(frozen=True, slots=True)
class Share:
    """How much of the gap between recorded and ideal goes when ``picked`` ops turn typical (``removed``,
    the study's M), and how much comes back when only they keep their recorded time (``added``)."""

    removed: float
    added: float
    without: Replayed  # the job with them typical
    only: Replayed  # the ideal job with them as recorded


@dataclass(frozen=True, slots=True)
class StragglerAnalysis:
    """The what-if analysis of one pipeline job (times in ns; keys of the attributions are strings)."""

    graph: JobGraph
    recorded_own: np.ndarray  # int64[I] each op's recorded own time (duration, or a collective's transfer)
    ideal_own: np.ndarray  # int64[I] its op type's typical time
    recorded: Replayed  # as recorded (launch gaps in)
    replayed: Replayed  # recorded durations and launch gaps: checks the model
    no_gaps: Replayed  # recorded durations, launch gaps removed
    ideal: Replayed  # every op at its type's typical duration
    by_dp_rank: dict[str, float]
    by_stage: dict[str, float]
    by_op_type: dict[str, float]
    by_worker: dict[tuple[int, int], float]  # (dp_rank, stage) -> min of its replica's and stage's
    worst_workers: tuple[tuple[int, int], ...]  # the ones M_W puts back to typical
    culprits: tuple[tuple[int, int], ...]  # of those, the ones that stand out: the fix names them
    healthy_workers: Replayed  # the job with the culprits at their stage peers' times: the fix's prediction
    balanced_stages: Replayed  # the job with its stages' work evened out: the stage fix's prediction
    worker_share: Share
    stage_share: Share
    worst_stage: int
    worst_stage_share: Share
    work_share: Share
    step_by_dp_rank: dict[int, dict[str, float]] = field(default_factory=dict)

    @property
    def slowdown(self) -> float:
        return self.no_gaps.mean_ns / self.ideal.mean_ns

    @property
    def step_slowdown(self) -> dict[int, float]:
        return {int(s): float(a / b) for s, a, b in zip(self.graph.steps, self.no_gaps.step_ns, self.ideal.step_ns)}

    @property
    def replay_residual(self) -> float:
        """Relative error of the model: the replay of the recorded job against the recorded step times."""
        return abs(self.replayed.mean_ns - self.recorded.mean_ns) / self.recorded.mean_ns


def op_type_names(g: JobGraph) -> np.ndarray:
    """object[I] each instance's op type, the four p2p types folded into forward/backward pp-comm."""
    names = np.array([_PP_COMM.get(i, name) for i, name in enumerate(OPTYPES)], dtype=object)
    return names[g.column(g.table.optype)]


def typical_own(g: JobGraph, recorded_own: np.ndarray) -> np.ndarray:
    """int64[I] every instance's typical own time: its op type's mean (work) or median (communication)."""
    code = g.column(g.table.optype)
    typical = np.zeros(len(OPTYPES))
    for c in np.unique(code):
        values = recorded_own[code == c]
        typical[c] = values.mean() if _BY_MEAN[c] else np.median(values)
    return np.rint(typical[code]).astype(np.int64)


def peer_own(g: JobGraph, recorded_own: np.ndarray, healed: np.ndarray) -> np.ndarray:
    """int64[I] every instance's own time as the other workers of its stage run it: the median of the stage's
    ops of its type on workers outside ``healed`` (bool[I]; all of them when the whole stage is healed). A healthy
    worker does its stage's work (the global typical would move work between stages), and the workers being
    healed are no measure of health (with two replicas a median would be half theirs)."""
    key = g.column(g.table.stage).astype(np.int64) * len(OPTYPES) + g.column(g.table.optype)
    out = np.empty(g.instances, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    for part in np.split(order, np.flatnonzero(np.diff(key[order])) + 1):
        peers = part[~healed[part]]
        out[part] = np.rint(np.median(recorded_own[peers if len(peers) else part]))
    return out


def balance_stages(g: JobGraph, recorded_own: np.ndarray) -> np.ndarray:
    """int64[I] own times with the work moved between stages until each does the same: every compute scaled by
    the mean of its kind over all stages over the mean on its stage (the variation within a stage kept)."""
    code, stage = g.column(g.table.optype), g.column(g.table.stage)
    out = recorded_own.astype(np.float64)
    for kind in COMPUTE:
        mine = code == kind
        if not mine.any():
            continue
        overall = recorded_own[mine].mean()
        for s in np.unique(stage[mine]):
            here = mine & (stage == s)
            out[here] *= overall / max(recorded_own[here].mean(), 1.0)
    return np.rint(out).astype(np.int64)


def _run(g: JobGraph, own: np.ndarray) -> Replayed:
    return Replayed(g.step_ns(g.replay(own)))


def _replay_label(shared: tuple, item: tuple[str, str]) -> np.ndarray:
    """One attribution replay (an executor task): the ideal job with ``item``'s label at its recorded times."""
    g, recorded_own, ideal_own, labels = shared
    dim, label = item
    return g.step_ns(g.replay(np.where(labels[dim] == label, recorded_own, ideal_own)))


def attribute(g: JobGraph, labels: dict[str, np.ndarray], recorded_own: np.ndarray, ideal_own: np.ndarray,
              ideal: Replayed, executor: Executor | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Per dimension (``labels``: dimension → object[I] each instance's label), each label's step times with
    only its ops at their recorded times on the ideal job; the replays run on ``executor`` (default: here)."""
    items = [(dim, str(label)) for dim, values in labels.items() for label in np.unique(values.astype(str))]
    shared = (g, recorded_own, ideal_own, {dim: values.astype(str) for dim, values in labels.items()})
    runs = (executor or LocalExecutor()).map(_replay_label, items, shared=shared)
    out: dict[str, dict[str, np.ndarray]] = {dim: {} for dim in labels}
    for (dim, label), step_ns in zip(items, runs):
        out[dim][label] = step_ns
    return out


def _ratios(runs: dict[str, np.ndarray], g: JobGraph, ideal: Replayed
            ) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """Each label's slowdown over the ideal, overall and per step, largest first."""
    overall = {label: float(r.mean() / ideal.mean_ns) for label, r in runs.items()}
    per_step = {int(s): {label: float(r[i] / ideal.step_ns[i]) for label, r in runs.items()}
                for i, s in enumerate(g.steps)}
    order = lambda d: dict(sorted(d.items(), key=lambda kv: -kv[1]))  # noqa: E731
    return order(overall), {s: order(d) for s, d in per_step.items()}


def _share(g: JobGraph, picked: np.ndarray, recorded_own: np.ndarray, target_own: np.ndarray,
           ideal_own: np.ndarray, no_gaps: Replayed, ideal: Replayed) -> Share:
    without = _run(g, np.where(picked, target_own, recorded_own))
    only = _run(g, np.where(picked, recorded_own, ideal_own))
    gap = no_gaps.mean_ns - ideal.mean_ns
    if gap <= 0:
        return Share(0.0, 0.0, without, only)
    return Share((no_gaps.mean_ns - without.mean_ns) / gap, (only.mean_ns - ideal.mean_ns) / gap, without, only)


def even_work(g: JobGraph, recorded_own: np.ndarray) -> np.ndarray:
    """int64[I] own times with every compute at its stage's mean for its kind (forward or backward): equal
    work for every micro-batch of every replica and step, the stages' differences kept."""
    code = g.column(g.table.optype)
    comp = np.isin(code, COMPUTE)
    key = g.column(g.table.stage)[comp] * 2 + (code[comp] == COMPUTE[1])
    _, inv = np.unique(key, return_inverse=True)
    mean = np.bincount(inv, weights=recorded_own[comp]) / np.bincount(inv)
    out = recorded_own.copy()
    out[comp] = np.rint(mean[inv]).astype(np.int64)
    return out


def _of_workers(dp: np.ndarray, stage: np.ndarray, workers: tuple[tuple[int, int], ...]) -> np.ndarray:
    picked = np.zeros(len(dp), dtype=bool)
    for d, s in workers:
        picked |= (dp == d) & (stage == s)
    return picked


def analyze_stragglers(g: JobGraph, executor: Executor | None = None) -> StragglerAnalysis:
    """The slowdown of ``g``'s job, its attribution and the shares that name the cause; the attribution's
    replays (one per replica, stage and op type) run on ``executor`` (default: one after another here)."""
    recorded_own, delays = g.recorded_transfers(), g.recorded_delays()
    replayed = Replayed(g.step_ns(g.replay(recorded_own, delays)))
    no_gaps = _run(g, recorded_own)
    ideal_own = typical_own(g, recorded_own)
    ideal = _run(g, ideal_own)
    dp, stage = g.column(g.table.dp_rank), g.column(g.table.stage)
    runs = attribute(g, {"dp_rank": dp, "stage": stage, "op_type": op_type_names(g)}, recorded_own, ideal_own,
                     ideal, executor)
    (by_dp, step_by_dp), (by_stage, _), (by_type, _) = (_ratios(runs[d], g, ideal)
                                                         for d in ("dp_rank", "stage", "op_type"))
    layout = g.table.layout
    rank_of = g.table.worker_ranks()
    by_worker = {(d, s): min(by_dp[str(d)], by_stage[str(s)]) for d in range(layout.dp) for s in range(layout.pp)}
    count = max(1, int(np.ceil(len(by_worker) * WORKER_FRACTION)))
    worst = tuple(sorted(by_worker, key=lambda w: (-by_worker[w], rank_of.get(w, 0)))[:count])
    # 3% of a large job is many workers, most of them tied near 1 behind the few that stand out
    culprits = tuple(w for w in worst if by_worker[w] - 1 >= STANDS_OUT * (by_worker[worst[0]] - 1))
    picked_workers, culprit_ops = _of_workers(dp, stage, worst), _of_workers(dp, stage, culprits)
    healthy = _run(g, np.where(culprit_ops, peer_own(g, recorded_own, culprit_ops), recorded_own))
    worst_stage = int(next(iter(by_stage)))
    shares = [_share(g, picked, recorded_own, target, ideal_own, no_gaps, ideal) for picked, target in (
        (picked_workers, ideal_own), (stage == layout.pp - 1, ideal_own), (stage == worst_stage, ideal_own),
        (np.isin(g.column(g.table.optype), COMPUTE), even_work(g, recorded_own)))]
    return StragglerAnalysis(
        graph=g, recorded_own=recorded_own, ideal_own=ideal_own, recorded=Replayed(g.recorded_step_ns()),
        replayed=replayed, no_gaps=no_gaps, ideal=ideal,
        by_dp_rank=by_dp, by_stage=by_stage, by_op_type=by_type, by_worker=by_worker, worst_workers=worst,
        culprits=culprits, healthy_workers=healthy, balanced_stages=_run(g, balance_stages(g, recorded_own)),
        worker_share=shares[0], stage_share=shares[1], worst_stage=worst_stage, worst_stage_share=shares[2],
        work_share=shares[3], step_by_dp_rank=step_by_dp)
