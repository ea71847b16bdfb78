"""Slow steps: a step whose wall time stands out from the median of the rank's other steps.

Robust to the few-percent noise of a shared machine: a step must exceed the
median of its peers by a ratio AND by several robust deviations (MAD) of them.
A last step far shorter than its peers is reported as partial, not compared.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.critical_path import StepReport

__all__ = ["NOISE_FLOOR", "SLOW_MADS", "SLOW_RATIO", "SlowStep", "compare_steps", "find_slow_steps", "partial_steps", "steps_to_explain"]

SLOW_RATIO = 1.25
SLOW_MADS = 6.0
NOISE_FLOOR = 0.04  # step-to-step noise of a shared machine, as a share of the median
MIN_EXCESS_NS = 500_000
PARTIAL_RATIO = 0.5


@dataclass(frozen=True, slots=True)
class SlowStep:
    """One rank's step against the median of its peers (``find_slow_steps``: one that took longer).

    Args:
        step (int): ProfilerStep number.
        rank (int): the rank.
        wall_ns (int): its wall time.
        median_ns (int): median wall time of the rank's other steps.
    """

    step: int
    rank: int
    wall_ns: int
    median_ns: int

    @property
    def excess_ns(self) -> int:
        """Wall time beyond the median of the peers."""
        return self.wall_ns - self.median_ns


def partial_steps(reports: list[StepReport]) -> set[tuple[int, int]]:
    """(step, rank) of last steps much shorter than the rank's others (cut by the profiler)."""
    out: set[tuple[int, int]] = set()
    by_rank: dict[int, list[StepReport]] = defaultdict(list)
    for r in reports:
        if r.step >= 0:
            by_rank[r.rank].append(r)
    for rank, steps in by_rank.items():
        steps.sort(key=lambda r: r.step)
        if len(steps) >= 3:
            others = np.median([r.wall_ns for r in steps[:-1]])
            if steps[-1].wall_ns < PARTIAL_RATIO * others:
                out.add((steps[-1].step, rank))
    return out


def compare_steps(reports: list[StepReport]) -> list[tuple[SlowStep, bool]]:
    """Every complete step of a rank that has at least three, against the median of the rank's
    other steps, and whether it is slow (``reports``: the complete ones, partial steps left out).

    The one place that says what a step's peers took: slow steps and the cap on a finding's
    impact (its step's excess) both come from here.
    """
    by_rank: dict[int, list[StepReport]] = defaultdict(list)
    for r in reports:
        if r.step >= 0:
            by_rank[r.rank].append(r)
    out: list[tuple[SlowStep, bool]] = []
    for rank, steps in by_rank.items():
        if len(steps) < 3:
            continue
        walls = np.array([r.wall_ns for r in steps], dtype=np.float64)
        for i, r in enumerate(steps):
            others = np.delete(walls, i)
            med = float(np.median(others))
            # robust spread of the peers, never below a few percent of their median
            sigma = max(float(np.median(np.abs(others - med))) * 1.4826, NOISE_FLOOR * med)
            slow = r.wall_ns >= SLOW_RATIO * med and r.wall_ns - med >= max(SLOW_MADS * sigma, MIN_EXCESS_NS)
            out.append((SlowStep(r.step, rank, r.wall_ns, int(med)), slow))
    return out


def find_slow_steps(reports: list[StepReport]) -> list[SlowStep]:
    """Steps slower than the median of the same rank's other steps, slowest first.

    A rank needs at least three complete steps to be judged.
    """
    partial = partial_steps(reports)
    complete = [r for r in reports if (r.step, r.rank) not in partial]
    slow = [s for s, is_slow in compare_steps(complete) if is_slow]
    return sorted(slow, key=lambda s: -s.excess_ns)


def steps_to_explain(complete: list[StepReport], slow: list[SlowStep]) -> set[int]:
    """The steps whose cause is given: the slow ones, and every step of a rank too short to compare its steps."""
    judged = {s.step for s, _ in compare_steps(complete)}
    return {s.step for s in slow} | ({r.step for r in complete} - judged)
