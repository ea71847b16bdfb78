"""Intervals of what-if predictions (``whatif/calibration.py``): drawn from the replay's error on real re-runs
where the project has them (and those ratios are the pairs', computed again here), else from the bounds every
speed-up obeys; the run-to-run spread of the rank's steps widens both."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.analysis import analyze
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.whatif.accuracy import RealPair, real_pairs
from bottleneck_oracle.whatif.calibration import interval_for, load_ratios, ratios_of
from bottleneck_oracle.whatif.predict import predict_whatif
from tests.conftest import DATA, WILD
from tools.calibrate_whatif import measured

QWEN = WILD / "tracelens" / "h100" / "qwen1.5_0.5b_chat"


@pytest.fixture(scope="module")
def pairs() -> list[RealPair]:
    return real_pairs(sorted(p.parent for p in DATA.glob("*/whatif.json")))


def _rows(pairs: list[RealPair]) -> list[tuple[str, str, str, float, float, float]]:
    return [(p.name, p.edit.kind.value, str(p.edit), p.recorded_ms, p.predicted_ms, p.measured_ms) for p in pairs]


def test_the_calibration_file_is_what_the_real_pairs_say_now(pairs: list[RealPair]) -> None:
    assert load_ratios() == ratios_of(_rows(pairs)) == measured()
    assert len(load_ratios()["fix"].ratios) >= 5


def test_each_real_re_run_lies_in_the_interval_the_other_pairs_give(pairs: list[RealPair]) -> None:
    """Leave one out: the pair's own ratio is not in the calibration that judges it."""
    inside = []
    for i, p in enumerate(pairs):
        others = ratios_of(_rows(pairs[:i] + pairs[i + 1:]))
        a = analyze(read_trace(DATA / p.name))
        rank = max((r for r in a.steps if r.step == p.step), key=lambda r: r.wall_ns).rank
        iv = interval_for(a, p.step, rank, (p.edit,), p.recorded_ms, p.predicted_ms, None, others)
        inside.append(iv.lo_ms <= p.measured_ms <= iv.hi_ms)
    assert len(inside) >= 5 and sum(inside) / len(inside) >= 0.8, inside


def test_an_edit_no_real_pair_measured_gets_the_speed_up_bounds_and_says_so() -> None:
    a = analyze(read_trace(QWEN))
    p = predict_whatif(a, 6, [parse_edit("scale kind=kernel x2")])
    iv = p.interval
    assert iv is not None and p.baseline_ms == 35.183
    # the kernels' 31.9 ms of GPU time, half of it at most; never slower; one step: no spread to add
    assert p.baseline_ms - 16.0 <= iv.lo_ms <= p.predicted_ms["replay"] <= iv.hi_ms == p.baseline_ms
    assert "no real re-run of scale edits" in iv.sources[0] and "one step" in iv.sources[1]
    body = p.to_json()
    assert body["interval_ms"] == [iv.lo_ms, iv.hi_ms] and body["interval_from"] == list(iv.sources)


def test_a_fix_s_interval_comes_from_the_real_re_runs_and_the_steps_spread(pairs: list[RealPair]) -> None:
    a = analyze(read_trace(DATA / "gloo_straggler_rank"))
    p = predict_whatif(a, 4, [parse_edit("fix straggler_rank step=4")])
    iv = p.interval
    assert iv is not None and iv.lo_ms < p.predicted_ms[p.chosen] < iv.hi_ms < p.baseline_ms
    assert "real re-run" in iv.sources[0] and "spread" in iv.sources[1]


def test_without_ratios_or_a_bound_the_interval_is_called_a_guess(tmp_path: Path) -> None:
    a = analyze(read_trace(DATA / "gloo_straggler_rank"))
    iv = interval_for(a, 4, 1, (parse_edit("fix straggler_rank step=4"),), 200.0, 70.0, None, {})
    assert "a guess" in iv.sources[0] and iv.lo_ms <= 70.0 and iv.hi_ms >= 200.0
