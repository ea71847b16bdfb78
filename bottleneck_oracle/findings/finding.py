"""A bottleneck finding, and the measures every detector shares.

Two kinds of finding: an anomaly (a slow step spends much more time in a
category than the median of its rank's other steps) and a chronic bottleneck
(a category takes a large share of most steps). Each names the ranks, the ops
on the critical path, and the time at stake in ms, which never exceeds what its
step lost against its peers (``findings/severity.py``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.path_nodes import PathNodes
from bottleneck_oracle.graph.types import CATEGORIES, Bottleneck, Category

__all__ = ["ANOMALY_SHARE", "CAT_INDEX", "MAJOR", "MINOR", "MIN_NS", "UNTRACED_SHARE", "Finding", "ms", "own_ns",
           "rank_ranges", "top_ops", "untraced_matters", "untraced_wait", "untraced_wait_ns"]

MIN_NS = 1_000_000  # nothing under 1 ms is worth a finding
ANOMALY_SHARE = 0.10  # of the median step: how much extra time makes an anomaly (in a slow step)
CAT_INDEX = {c: i for i, c in enumerate(CATEGORIES)}
UNTRACED_SHARE = 0.10  # of a step's wall: GPU waits on what the trace does not show that the answers must name
MAJOR = "major"  # a cause of a slow step, a chronic bottleneck, or a finding of a trace too short to compare
MINOR = "minor"  # an anomaly of a step that is not slow: listed after every major finding


@dataclass(frozen=True, slots=True)
class Finding:
    """One bottleneck, with the evidence for it.

    Args:
        category (Bottleneck): what kind of bottleneck.
        step (int | None): the step, or None for every step (chronic).
        ranks (tuple[int, ...]): ranks it concerns (the late rank for a straggler).
        ops (tuple[str, ...]): ops on the critical path that show it, worst first.
        impact_ms (float): time at stake: excess over peers, or the time spent; for a finding tied to
            a step, at most what that step took beyond the median of its rank's other steps.
        evidence (str): one or two sentences with the numbers.
        severity (str): ``MAJOR`` or ``MINOR`` (an anomaly of a step that is not slow).
        waiting (tuple[int, ...]): ranks that waited for it inside a collective (a straggler's peers):
            the time it cost shows in their steps too.
        waited_ms (tuple[float, ...]): how long each rank of ``waiting`` waited (set on a step's cause).
        cause (bool): the cause of its step (``findings/cause.py``): what delayed it, on the rank that did.
    """

    category: Bottleneck
    step: int | None
    ranks: tuple[int, ...]
    ops: tuple[str, ...]
    impact_ms: float
    evidence: str
    severity: str = MAJOR
    waiting: tuple[int, ...] = ()
    waited_ms: tuple[float, ...] = ()
    cause: bool = False


def ms(ns: float) -> float:
    """ns → ms, rounded to µs."""
    return round(float(ns) / 1e6, 3)


def rank_ranges(ranks: list[int]) -> str:
    """``[8, 9, 10, 12]`` → ``8-10, 12``."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)


def own_ns(r: StepReport, cat: Category) -> int:
    """Time of the step's critical path in ``cat`` on the step's own rank."""
    mask = (r.path_category == CAT_INDEX[cat]) & (r.path_rank == r.rank)
    return int(r.path_dur_ns[mask].sum())


def untraced_wait(g: ExecGraph, r: StepReport) -> np.ndarray:
    """bool per segment of ``r``'s path: GPU work on the step's rank that started long after its launch, on
    an idle stream, waiting for something the trace does not show (``points.py`` makes such a wait idle,
    owned by the work that waited): work launched before the profiler started, another process, an
    event recorded outside the trace."""
    node = np.maximum(r.path_node, 0)
    on_gpu = (r.path_node >= 0) & g.trace.lanes.is_gpu[g.lane[node]]
    return on_gpu & (r.path_category == CAT_INDEX[Category.IDLE]) & (r.path_rank == r.rank)


def untraced_wait_ns(g: ExecGraph, r: StepReport) -> int:
    """How long ``r``'s GPU work waited for what the trace does not show (``untraced_wait``)."""
    return int(r.path_dur_ns[untraced_wait(g, r)].sum())


def untraced_matters(wait_ns: float, wall_ns: float) -> bool:
    """Whether a step's untraced GPU wait is large enough that an answer about the step must say so."""
    return wait_ns >= max(MIN_NS, UNTRACED_SHARE * wall_ns)


def top_ops(g: ExecGraph | PathNodes, r: StepReport, mask: np.ndarray, k: int = 5) -> tuple[str, ...]:
    """Names of the ops with the most critical time among the path segments in ``mask``."""
    totals: dict[str, int] = defaultdict(int)
    for node, dur in zip(r.path_node[mask].tolist(), r.path_dur_ns[mask].tolist()):
        if node >= 0:
            totals[g.node_name(node)] += dur
    return tuple(sorted(totals, key=lambda n: -totals[n])[:k])
