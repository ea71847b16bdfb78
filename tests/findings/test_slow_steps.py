from __future__ import annotations

import numpy as np

from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.slow_steps import compare_steps, find_slow_steps, partial_steps
from bottleneck_oracle.graph.types import Category


def _report(step: int, rank: int, wall_ms: float) -> StepReport:
    wall = int(wall_ms * 1e6)
    empty = np.zeros(0, dtype=np.int64)
    return StepReport(step, rank, 0, wall, {c: 0 for c in Category}, empty, empty.astype(np.int8),
                      empty.astype(np.int32), empty, empty, 0, 1)


def test_clean_noisy_steps_report_nothing() -> None:
    rng = np.random.default_rng(0)
    reports = [_report(s, r, 40 * (1 + rng.uniform(-0.06, 0.06))) for s in range(2, 10) for r in range(2)]
    assert find_slow_steps(reports) == []


def test_one_slow_step_on_one_rank() -> None:
    walls = [40, 41, 39, 90, 40, 40.5]
    reports = [_report(s, 1, w) for s, w in enumerate(walls, start=2)] + [_report(s, 0, 40) for s in range(2, 8)]
    (slow,) = find_slow_steps(reports)
    assert (slow.step, slow.rank) == (5, 1)
    assert slow.median_ns == 40_000_000 and slow.excess_ns == 50_000_000


def test_short_last_step_is_partial_not_compared() -> None:
    reports = [_report(s, 0, 40) for s in range(1, 6)] + [_report(6, 0, 0.05)]
    assert partial_steps(reports) == {(6, 0)}
    assert find_slow_steps(reports) == []


def test_two_steps_are_not_enough_to_judge() -> None:
    assert find_slow_steps([_report(1, 0, 10), _report(2, 0, 100)]) == []


def test_every_step_is_compared_with_its_peers() -> None:
    reports = [_report(s, 0, w) for s, w in enumerate([40, 41, 39, 90, 44], start=2)] + [_report(2, 1, 40)]
    compared = {(s.step, s.rank): (s.excess_ns / 1e6, slow) for s, slow in compare_steps(reports)}
    # rank 1 has one step: no peers to compare it with
    assert compared == {(2, 0): (-2.5, False), (3, 0): (-1.0, False), (4, 0): (-3.5, False),
                        (5, 0): (49.5, True), (6, 0): (3.5, False)}
