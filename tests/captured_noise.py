"""Real captures on a shared machine: whether a fault stands clear of a run's own noise, and a
capture taken again while it does not (the machine slows for seconds at a time)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.dag.analysis import Analysis
from bottleneck_oracle.dag.slow_steps import NOISE_FLOOR, SLOW_MADS, SLOW_RATIO
from bottleneck_oracle.truth.injection import parse_injection


def visible(a: Analysis, step: int, injected_ms: float) -> bool:
    """Whether a fault of ``injected_ms`` at ``step`` stands clear of this run's own noise, by the
    slow-step rule: above six robust deviations of every rank's other steps even if its own step
    ran two deviations fast."""
    for rank in {r.rank for r in a.steps}:
        others = np.array([r.wall_ns for r in a.steps if r.rank == rank and r.step != step], dtype=float)
        med = float(np.median(others))
        sigma = max(float(np.median(np.abs(others - med))) * 1.4826, NOISE_FLOOR * med)
        if injected_ms * 1e6 - 2 * sigma < max(SLOW_MADS * sigma, (SLOW_RATIO - 1) * med):
            return False
    return True


def injected(tmp: Path, text: str, take: Callable[[Path, str], Analysis], attempts: int = 3,
             cost_ms: float | None = None) -> Analysis:
    """``take(folder, text)`` (a capture with one fault, analysed), taken again up to ``attempts`` times
    while the run's noise would hide the fault (of ``cost_ms``, default its size in ms); skips the
    test when it always does."""
    injection = parse_injection(text)
    for attempt in range(attempts):
        a = take(tmp / str(attempt), text)
        if visible(a, injection.step, cost_ms if cost_ms is not None else injection.size or 0.0):
            return a
    walls = sorted(round(r.wall_ns / 1e6) for r in a.steps)
    pytest.skip(f"{attempts} captures too noisy to show a {text} (step walls {walls} ms)")
