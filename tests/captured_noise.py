"""Real captures on a shared machine: whether a fault stands clear of a run's own noise, a capture
taken again while it does not (the machine slows for seconds at a time), and a failing one kept.

A 2-core machine shared with other work stalls now and then for tens to hundreds of ms. A capture
that hit such a stall holds a real slow step, which the analysis is right to report, so the recorder
of the committed captures (tests/captured_data.py) and the live tests (``make test-live``) take a
capture again while its fault is hidden; a live test that still fails keeps its capture.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.findings.slow_steps import NOISE_FLOOR, SLOW_MADS, SLOW_RATIO
from bottleneck_oracle.truth.injection import parse_injection

T = TypeVar("T")
ATTEMPTS = 3
# where a live test that fails keeps its capture, to be read again (ignored by git, as the workspace is)
KEPT = Path(__file__).resolve().parents[1] / ".oracle" / "failed-captures"


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


def quiet(a: Analysis, but: int | None = None) -> bool:
    """Whether no step but ``but`` is slow and no finding names another step: the run had no stall of
    its own."""
    return (all(s.step == but for s in a.slow_steps)
            and all(f.step in (None, but) for f in a.findings))


def injected(tmp: Path, text: str, take: Callable[[Path, str], Analysis], attempts: int = ATTEMPTS,
             cost_ms: float | None = None, alone: bool = False) -> Analysis:
    """``take(folder, text)`` (a capture with one fault, analysed), taken again up to ``attempts`` times
    while the run's noise would hide the fault (of ``cost_ms``, default its size in ms), or, with
    ``alone``, while another step stalled too; skips the test when it always does."""
    injection = parse_injection(text)
    for attempt in range(attempts):
        a = take(tmp / str(attempt), text)
        if (visible(a, injection.step, cost_ms if cost_ms is not None else injection.size or 0.0)
                and (not alone or quiet(a, injection.step))):
            return a
    walls = sorted(round(r.wall_ns / 1e6) for r in a.steps)
    pytest.skip(f"{attempts} captures too noisy to show a {text} (step walls {walls} ms)")


def retaken(take: Callable[[int], T], check: Callable[[T], None], attempts: int = ATTEMPTS) -> T:
    """``check(take(i))`` for up to ``attempts`` takes of a real measurement (a re-capture); the first
    that passes is returned and the last failure raised when none does."""
    for attempt in range(attempts):
        value = take(attempt)
        try:
            check(value)
            return value
        except AssertionError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("no attempt")  # attempts < 1


@contextmanager
def kept_on_failure(folder: Path, label: str) -> Iterator[None]:
    """Copies the capture in ``folder`` to ``KEPT/<label>`` when the block fails, and says where: the
    run that failed can then be analysed again, to tell a fault of the code from a noisy take."""
    try:
        yield
    except AssertionError as e:
        kept = KEPT / label.replace("/", "_").replace("@", "_").replace(":", "_")
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(folder, kept)
        raise AssertionError(f"{e}\n(the capture is kept in {kept})") from e
