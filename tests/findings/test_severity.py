"""No finding overstates: its impact is at most what its step lost against the rank's other steps,
and a finding of a step that is not slow is marked minor and listed after every major one.

Checked on every real trace shared beside the checkout, the captures on disk and one synthetic job
per bottleneck category.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import Finding
from bottleneck_oracle.findings.severity import bound_findings
from bottleneck_oracle.graph.types import Bottleneck, Category
from bottleneck_oracle.traces import read_trace
from tests.analysis.real_cases import REAL_FOLDERS, real_case
from tests.analysis.synth_cases import synth_case
from tests.findings.test_detection import CASES
from tests.tracebuilder import op, step, write

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = REAL_FOLDERS + [ROOT / "examples" / "gpt_2rank",
                                                             ROOT / "tests" / "data" / "ddp_finalize_wait"]
TOL_MS = 0.001  # impacts are rounded to µs


def _bounds(a: Analysis) -> tuple[dict[tuple[int, int], float], set[tuple[int, int]]]:
    """Per complete (step, rank): its excess over the median of the rank's other complete steps in ms
    (its wall time where the rank has fewer than three: no median); and the steps with no median."""
    walls: dict[int, dict[int, int]] = {}
    for r in a.steps:
        if (r.step, r.rank) not in a.partial_steps:
            walls.setdefault(r.rank, {})[r.step] = r.wall_ns
    bound, no_median = {}, set()
    for rank, mine in walls.items():
        numbered = {s: w for s, w in mine.items() if s >= 0}
        for s, w in mine.items():
            others = [v for t, v in numbered.items() if t != s]
            if s >= 0 and len(numbered) >= 3:
                bound[(s, rank)] = (w - float(np.median(others))) / 1e6
            else:
                bound[(s, rank)] = w / 1e6
                no_median.add((s, rank))
    return bound, no_median


def _check(a: Analysis) -> int:
    """Asserts the rule on every finding of ``a``; returns how many findings are tied to a step."""
    bound, no_median = _bounds(a)
    slow = {(s.step, s.rank) for s in a.slow_steps}
    severities = [f.severity for f in a.findings]
    assert set(severities) <= {"major", "minor"}
    assert severities == sorted(severities), "a minor finding is listed before a major one"
    tied = 0
    for f in a.findings:
        if f.step is None:
            assert f.severity == "major"
            continue
        tied += 1
        where = [(f.step, r) for r in f.ranks + f.waiting if (f.step, r) in bound]
        assert where, f"{f.category.value} on step {f.step}, which no complete step report has"
        assert f.impact_ms <= max(bound[w] for w in where) + TOL_MS, (f, [bound[w] for w in where])
        if not any(w in slow or w in no_median for w in where):
            assert f.severity == "minor", f
    return tied


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_findings_never_claim_more_than_their_step_lost(folder: Path) -> None:
    a = real_case(folder)
    if a is None:
        pytest.skip("the reader refuses it")
    _check(a)


@pytest.mark.parametrize("inject,job", [c[:2] for c in CASES], ids=[c[0].split("@")[0] for c in CASES])
def test_synthetic_findings_never_claim_more_than_their_step_lost(inject: str, job: dict) -> None:
    a, _ = synth_case(inject=inject, **job)
    assert _check(a) >= 1


def test_gpt_2rank_straggler_is_capped_and_the_normal_steps_pause_is_minor() -> None:
    a = real_case(ROOT / "examples" / "gpt_2rank")
    excess = {(s.step, s.rank): s.excess_ns / 1e6 for s in a.slow_steps}
    assert excess[(5, 1)] == pytest.approx(146.537, abs=0.01)
    cause, late = a.findings[:2]
    assert (cause.category, cause.step, cause.ranks) == (Bottleneck.HOST_PAUSE, 5, (1,))
    assert (late.category, late.step, late.ranks, late.waiting) == (Bottleneck.STRAGGLER_RANK, 5, (1,), (0,))
    # its two buckets were late together by 150 ms each: 156 ms of waiting, not their 299 ms sum,
    # and the step took 146.5 ms more than the median
    assert late.impact_ms <= excess[(5, 1)] + TOL_MS and late.impact_ms > 140
    assert cause.impact_ms <= excess[(5, 1)] + TOL_MS
    assert all(f.severity == "minor" for f in a.findings if f.step == 7)
    assert [f.severity for f in a.findings] == ["major", "major", "minor"]


def test_overlapping_late_collectives_are_waited_for_once(tmp_path: Path) -> None:
    # one step (no median): two DDP buckets in flight together, rank 1 late to both by 25 ms
    def rank(call_us: int) -> list[dict]:
        events = [step(1, 0, 50_000), op("aten::mm", 1_000, call_us - 1_500), op("aten::add", 40_060, 5_000)]
        for k, tid in enumerate((2, 3)):
            t = call_us + 500 * k
            events += [op("c10d::allreduce_", t, 50, **{"Input Dims": [[[1000]], [], []]}),
                       op("gloo:all_reduce", t + 100, 40_000 - t - 100, tid=tid, cat="user_annotation",
                          **{"Input Dims": [[1000]]})]
        return events

    write(tmp_path / "job" / "rank0.json.gz", rank(5_000), rank=0, world=2)
    write(tmp_path / "job" / "rank1.json.gz", rank(30_000), rank=1, world=2)
    a = analyze(read_trace(tmp_path / "job"))
    (late,) = [f for f in a.findings if f.category == Bottleneck.STRAGGLER_RANK]
    assert (late.step, late.ranks, late.waiting, late.severity) == (1, (1,), (0,), "major")
    assert late.impact_ms == 25.5  # from rank 0's first arrival to rank 1's last, not 2 x 25 ms


def _report(step: int, rank: int, wall_ms: float) -> StepReport:
    empty = np.zeros(0, dtype=np.int64)
    return StepReport(step, rank, 0, int(wall_ms * 1e6), {c: 0 for c in Category}, empty, empty.astype(np.int8),
                      empty.astype(np.int32), empty, empty, 0, 1)


def _finding(step: int | None, ranks: tuple[int, ...], impact_ms: float, waiting: tuple[int, ...] = ()) -> Finding:
    return Finding(Bottleneck.HOST_PAUSE, step, ranks, (), impact_ms, "a gap", waiting=waiting)


def test_the_rule_caps_marks_and_drops() -> None:
    # rank 0: steps of 40 ms, step 5 of 90 (slow: 50 ms excess), step 7 of 46 (not slow: 6 ms)
    walls = {2: 40, 3: 40, 4: 40, 5: 90, 6: 40, 7: 46}
    reports = [_report(s, 0, w) for s, w in walls.items()] + [_report(s, 1, 40) for s in walls]
    out = bound_findings([
        _finding(5, (0,), 80), _finding(7, (0,), 11), _finding(3, (0,), 5), _finding(None, (0,), 300),
        _finding(9, (0,), 20),  # a step no complete report has (a partial one)
        _finding(5, (1,), 30, waiting=(0,)),  # late rank 1 held rank 0 in step 5
    ], reports)
    assert [(f.step, f.ranks, f.impact_ms, f.severity) for f in out] == [
        (5, (0,), 50.0, "major"), (7, (0,), 6.0, "minor"), (None, (0,), 300, "major"), (5, (1,), 30, "major")]
    assert out[0].evidence == "a gap; capped at 50.0 ms, what rank 0's step took beyond its median"
    assert out[3].evidence == "a gap"  # under the cap: as the detector said


def test_without_a_median_a_finding_stands_on_its_own_evidence() -> None:
    reports = [_report(1, 0, 30), _report(2, 0, 90)]  # two steps: nothing to compare with
    out = bound_findings([_finding(2, (0,), 80), _finding(1, (0,), 45)], reports)
    assert [(f.impact_ms, f.severity) for f in out] == [(80, "major"), (30.0, "major")]
    assert out[1].evidence.endswith("capped at the step's 30.0 ms wall time")
