"""What holds a pipeline job back, in words, and what to do about it, each fix with its predicted step time.

The cause follows the shares of ``job/stragglers.py``: a few workers whose return to typical closes half
the gap (``slow_worker``); else the larger of a stage whose return to typical (``stage_imbalance``) and every
compute at its stage's typical time (``uneven_microbatches``: micro-batches and replicas of unequal work, as
uneven sequence lengths make them) closing a third of it; ``none`` when the job runs within ``QUIET`` of its
ideal. A cause is named only when its fix saves more than the steps' noise. Every prediction is a replay of
the job's own steps; its interval is the 95% interval of the mean over those steps widened by the replay's
residual on the recorded job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.job.stragglers import Replayed, StragglerAnalysis

__all__ = ["Fix", "StragglerVerdict", "heat", "interval_ns", "straggler_verdict", "QUIET", "NAMES_CAUSE"]

QUIET = 1.05  # a slowdown below 5% is noise between steps, not a straggler
NAMES_CAUSE = 0.5  # a share that closes half the gap names the cause
SECONDARY = 0.3  # a share that closes a third of it is worth a line


@dataclass(frozen=True, slots=True)
class Fix:
    """One action, the step time a replay predicts after it, and what it saves (ns)."""

    action: str
    cause: str
    predicted_ns: float
    interval_ns: tuple[float, float]
    saving_ns: float
    share: float  # of the gap between recorded and ideal it closes
    workers: tuple[tuple[int, int, int], ...] = ()  # (rank, dp_rank, stage)
    stage: int | None = None


@dataclass(frozen=True, slots=True)
class StragglerVerdict:
    cause: str  # slow_worker | stage_imbalance | uneven_microbatches | unexplained | none
    headline: str
    explanation: tuple[str, ...]
    fixes: tuple[Fix, ...]  # the cause's first
    secondary: str = ""


def interval_ns(run: Replayed, residual: float) -> tuple[float, float]:
    """95% interval of ``run``'s mean step time: the steps' spread, widened by the replay's relative residual."""
    n = len(run.step_ns)
    spread = 1.96 * float(run.step_ns.std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    half = spread + residual * run.mean_ns
    return run.mean_ns - half, run.mean_ns + half


def _workers(a: StragglerAnalysis) -> tuple[tuple[int, int, int], ...]:
    t = a.graph.table
    rank = t.worker_ranks()
    return tuple((rank.get(w, -1), w[0], w[1]) for w in a.culprits)


def _names(workers: tuple[tuple[int, int, int], ...]) -> str:
    return ", ".join(f"rank {r} (dp_rank {d}, stage {s})" for r, d, s in workers)


def _fixes(a: StragglerAnalysis) -> list[Fix]:
    residual, base = a.replay_residual, a.no_gaps.mean_ns
    workers = _workers(a)
    layout = a.graph.table.layout
    plural = "s" if len(workers) > 1 else ""
    candidates = [
        (f"replace or drain {_names(workers)}: restart it on a healthy node, or exclude the node{plural}",
         "slow_worker", a.worker_share, {"workers": workers}),
        (f"move layers off stage {a.worst_stage}: give it fewer transformer layers than the other "
         f"{layout.pp - 1} stage{'s' if layout.pp > 2 else ''} (or move the loss/embedding work)",
         "stage_imbalance", a.worst_stage_share, {"stage": a.worst_stage}),
        ("balance the work per micro-batch: pack sequences to equal token counts (or sort by length "
         "into micro-batches)", "uneven_microbatches", a.work_share, {}),
    ]
    out = []
    for action, cause, share, extra in candidates:
        # a healthy worker does its stage's work; moved layers leave the job's work as it was
        run = {"slow_worker": a.healthy_workers, "stage_imbalance": a.balanced_stages}.get(cause, share.without)
        out.append(Fix(action, cause, run.mean_ns, interval_ns(run, residual), base - run.mean_ns,
                       (base - run.mean_ns) / max(base - a.ideal.mean_ns, 1.0), **extra))
    return out


def _clear(fix: Fix, a: StragglerAnalysis) -> bool:
    """Whether ``fix`` saves more than the steps' noise: its whole interval below the recorded mean step."""
    return fix.interval_ns[1] < a.no_gaps.mean_ns


def straggler_verdict(a: StragglerAnalysis) -> StragglerVerdict:
    """The cause of ``a``'s slowdown in words, and its fixes."""
    s = a.slowdown
    ms = lambda ns: f"{ns / 1e6:,.1f} ms" if ns < 1e9 else f"{ns / 1e9:,.3f} s"  # noqa: E731
    facts = (f"S = {s:.3f}: the mean step takes {ms(a.no_gaps.mean_ns)} with launch gaps removed "
             f"({ms(a.recorded.mean_ns)} as recorded) against {ms(a.ideal.mean_ns)} if every op took its "
             f"type's typical time")
    every = {f.cause: f for f in _fixes(a)}
    if s < QUIET:
        return StragglerVerdict("none", f"No stragglers: the job runs within {(s - 1) * 100:.1f}% of its ideal "
                                f"(S = {s:.3f}).", (facts,), ())
    fixes: tuple[Fix, ...]
    workers = _workers(a)
    gap_pct = (s - 1) * 100
    # a worker is slow against the other replicas of its stage: with one replica it is the stage
    if a.graph.table.layout.dp > 1 and a.worker_share.removed >= NAMES_CAUSE and _clear(every["slow_worker"], a):
        cause = "slow_worker"
        head = (f"{'One slow worker' if len(workers) == 1 else f'{len(workers)} slow workers'} "
                f"hold{'s' if len(workers) == 1 else ''} the job back: {_names(workers)}; healthy, "
                f"{'it' if len(workers) == 1 else 'they'} would bring a step to {ms(a.healthy_workers.mean_ns)} "
                f"instead of {ms(a.no_gaps.mean_ns)} (S = {s:.3f}).")
        secondary = ""
    else:
        stage, work = a.worst_stage_share.removed, a.work_share.removed
        ranked = [c for c, share in sorted([("stage_imbalance", stage), ("uneven_microbatches", work)],
                                           key=lambda kv: -kv[1]) if share >= SECONDARY and _clear(every[c], a)]
        cause, secondary = (ranked + [""])[:2] if ranked else ("unexplained", "")
        head = {
            "stage_imbalance": f"Stage {a.worst_stage} is the long stage: the pipeline split is unbalanced "
                               f"and every other stage waits for it; balanced, a step would take "
                               f"{ms(a.balanced_stages.mean_ns)} instead of {ms(a.no_gaps.mean_ns)} "
                               f"(S = {s:.3f}).",
            "uneven_microbatches": f"Uneven work across micro-batches and replicas (as uneven sequence lengths "
                                   f"make it) slows the job {gap_pct:.0f}%; with equal work a step would take "
                                   f"{ms(a.work_share.without.mean_ns)} instead of {ms(a.no_gaps.mean_ns)} "
                                   f"(S = {s:.3f}).",
            "unexplained": f"The job runs {gap_pct:.0f}% slower than its ideal (S = {s:.3f}), but no worker, "
                           f"stage or micro-batch pattern explains most of it beyond the steps' noise; op type "
                           f"{next(iter(a.by_op_type))} leads the attribution.",
        }[cause]
    if a.graph.table.layout.dp == 1:
        every.pop("slow_worker")  # no replica to compare a worker with
    if cause == "unexplained":  # each a partial answer: all of them, the largest saving first
        fixes = tuple(sorted(every.values(), key=lambda f: -f.saving_ns))
    else:  # the others overlap the cause (a slow worker also makes its stage and its replica uneven)
        fixes = tuple(every[c] for c in (cause, secondary) if c)
    lines = [facts,
             f"worker share M_W = {a.worker_share.removed:.2f} ({_names(workers)} typical), last-stage share "
             f"M_S = {a.stage_share.removed:.2f}, stage {a.worst_stage} share {a.worst_stage_share.removed:.2f}, "
             f"even-work share {a.work_share.removed:.2f}",
             f"leading: dp_rank {next(iter(a.by_dp_rank))} ({next(iter(a.by_dp_rank.values())):.3f}), stage "
             f"{next(iter(a.by_stage))} ({next(iter(a.by_stage.values())):.3f}), op type "
             f"{next(iter(a.by_op_type))} ({next(iter(a.by_op_type.values())):.3f})"]
    if secondary:
        lines.append(f"also: {secondary.replace('_', ' ')} closes {_share_of(a, secondary):.0%} of the gap "
                     f"on its own")
    return StragglerVerdict(cause, head, tuple(lines), fixes, secondary)


def _share_of(a: StragglerAnalysis, cause: str) -> float:
    return {"slow_worker": a.worker_share, "stage_imbalance": a.worst_stage_share,
            "uneven_microbatches": a.work_share}[cause].removed


def heat(a: StragglerAnalysis) -> np.ndarray:
    """float64[dp, pp] each worker's score (``by_worker``): the heatmap of S per worker."""
    layout = a.graph.table.layout
    out = np.ones((layout.dp, layout.pp))
    for (d, s), v in a.by_worker.items():
        out[d, s] = v
    return out
