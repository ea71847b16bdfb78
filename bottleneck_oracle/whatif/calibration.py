"""How far the replay's savings have been from real re-runs, per edit kind, and the interval of a prediction.

A real pair is a job recorded, changed, and recorded again (``whatif.json``: the step times of an in-process
re-run under each edit, or the folders of two separate runs; ``accuracy.real_pairs``). For each pair the ratio
of the saving the re-run measured to the saving the replay predicted says how right the replay was;
``calibration.json`` beside this module holds, per edit kind, the ratios of every real pair the project has
(a test computes them again from the pairs).

An interval (``interval_for``) is the recorded step less the predicted saving times those ratios, widened by
the run-to-run spread of the rank's other steps (a prediction band: Student's t on the few steps it has).
An edit kind no real pair has measured gets the bounds every such edit obeys instead: a speed-up never
lengthens its step and saves at most its edited work's own time times (1 - 1/K); a predictor with neither
says it cannot know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bottleneck_oracle.analysis import Analysis
from bottleneck_oracle.truth.edits import Edit

__all__ = ["CALIBRATION", "Interval", "Ratios", "band_factor", "interval_for", "load_ratios", "ratios_of",
           "save_ratios", "step_spread_ms"]

CALIBRATION = Path(__file__).with_name("calibration.json")
Z90 = 1.645  # a two-sided 90% band of a normal spread
MAD_SIGMA = 1.4826  # a normal spread's sigma over its median absolute deviation
# Student's t, 95th percentile, by degrees of freedom: a spread measured on few steps is itself uncertain,
# so a 90% band for one more step is wider than the normal one (Z90 from 31 on)
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
        1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697)


@dataclass(frozen=True, slots=True)
class Ratios:
    """Measured saving over predicted saving on the real pairs of one edit kind.

    Args:
        kind (str): the edit kind (``fix``, ``scale``, ...).
        ratios (tuple[float, ...]): one per real pair.
        pairs (tuple[str, ...]): the pairs, ``folder: edit``.
    """

    kind: str
    ratios: tuple[float, ...]
    pairs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Interval:
    """Where the step would land, and why that wide.

    Args:
        lo_ms, hi_ms (float): the bounds, ms.
        sources (tuple[str, ...]): what set them, one phrase each.
    """

    lo_ms: float
    hi_ms: float
    sources: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """``{"interval_ms": [lo, hi], "interval_from": [...]}``."""
        return {"interval_ms": [self.lo_ms, self.hi_ms], "interval_from": list(self.sources)}


def ratios_of(pairs: list[tuple[str, str, str, float, float, float]]) -> dict[str, Ratios]:
    """Per edit kind, the ratios of ``pairs``: (pair name, edit kind, edit, recorded ms, predicted ms, measured
    ms); a pair whose prediction saved nothing tells nothing of a ratio and is left out."""
    out: dict[str, tuple[list[float], list[str]]] = {}
    for name, kind, edit, recorded, predicted, measured in pairs:
        if recorded - predicted <= 1e-3:
            continue
        ratios, names = out.setdefault(kind, ([], []))
        ratios.append(round((recorded - measured) / (recorded - predicted), 4))
        names.append(f"{name}: {edit}")
    return {k: Ratios(k, tuple(r), tuple(n)) for k, (r, n) in sorted(out.items())}


def save_ratios(ratios: dict[str, Ratios], path: Path = CALIBRATION) -> None:
    """Writes ``ratios`` as the calibration file."""
    doc = {k: {"ratios": list(r.ratios), "pairs": list(r.pairs)} for k, r in ratios.items()}
    path.write_text(json.dumps(doc, indent=1) + "\n")


def load_ratios(path: Path = CALIBRATION) -> dict[str, Ratios]:
    """The calibration file's ratios (none when it is missing)."""
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    return {k: Ratios(k, tuple(v["ratios"]), tuple(v["pairs"])) for k, v in doc.items()}


def band_factor(n: int) -> float:
    """How many sigmas either way hold one more sample 90% of the time, the sigma measured on ``n`` samples
    (a prediction interval: Student's t with n - 1 degrees of freedom, times sqrt(1 + 1/n))."""
    t = _T95[n - 2] if 2 <= n <= len(_T95) + 1 else Z90
    return float(t * np.sqrt(1.0 + 1.0 / n))


def step_spread_ms(a: Analysis, step: int, rank: int) -> tuple[float, int]:
    """A 90% band of the rank's step time from run to run (ms), from its other complete steps, and how many."""
    walls = np.array([r.wall_ns for r in a.steps if r.rank == rank and r.step != step
                      and (r.step, r.rank) not in a.partial_steps], dtype=np.float64) / 1e6
    if len(walls) < 3:
        return 0.0, len(walls)
    sigma = MAD_SIGMA * np.median(np.abs(walls - np.median(walls)))
    return float(band_factor(len(walls)) * sigma), len(walls)


def interval_for(a: Analysis, step: int, rank: int, edits: tuple[Edit, ...], recorded_ms: float,
                 predicted_ms: float, cap_ms: float | None, ratios: dict[str, Ratios]) -> Interval:
    """The interval of a replay's prediction of ``step`` (its slowest ``rank``) under ``edits``.

    Args:
        cap_ms: the most the edits can save the step (the edited work's own time times 1 - 1/K); None when
            the edits are no pure speed-up (a slow-down, a fix that cuts waits).
        ratios: the calibration (``load_ratios``).
    """
    spread, n_steps = step_spread_ms(a, step, rank)
    kinds = {e.kind.value for e in edits}
    known = [ratios[k] for k in kinds if k in ratios and len(ratios[k].ratios) >= 2]
    saving = recorded_ms - predicted_ms
    sources = []
    if known and len(known) == len(kinds):
        rs = [x for r in known for x in r.ratios]
        lo, hi = recorded_ms - saving * max(rs), recorded_ms - saving * min(rs)
        n = sum(len(r.ratios) for r in known)
        sources.append(f"the replay's saving against {n} real re-run(s) of {'/'.join(sorted(kinds))} edits: "
                       f"{min(rs):.2f}x to {max(rs):.2f}x of the predicted")
    elif cap_ms is not None:
        lo, hi = recorded_ms - cap_ms, recorded_ms
        sources.append(f"no real re-run of {'/'.join(sorted(kinds))} edits: the bounds every speed-up obeys (never "
                       f"slower, at most {cap_ms:.3f} ms of edited work saved)")
    else:
        lo, hi = min(predicted_ms, recorded_ms), max(predicted_ms, recorded_ms)
        sources.append(f"no real re-run of {'/'.join(sorted(kinds))} edits and no bound: between the replay and "
                       "the record (a guess)")
    if n_steps >= 3:
        sources.append(f"the rank's step-to-step spread, {spread:.3f} ms either way over {n_steps} steps")
    else:
        sources.append("one step: its run-to-run spread is unknown")
    lo, hi = min(lo, predicted_ms) - spread, max(hi, predicted_ms) + spread
    if cap_ms is not None:
        lo = max(lo, recorded_ms - cap_ms - spread)
    return Interval(round(max(lo, 0.0), 3), round(hi, 3), tuple(sources))
