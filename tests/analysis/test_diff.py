"""Two runs compared: the verdict and its sign, the comparability, what moved (synthetic GPU jobs with a
known change, HTA's own comparison traces, real captures)."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.analysis.diff import Steady, _breakdown, diff_runs, normalized_name, steady_steps
from bottleneck_oracle.findings.finding import untraced_wait_ns
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.graph.types import Category
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.injection import parse_injection
from tests.conftest import DATA, REAL

STEPS = 8


@cache
def _synth(seed: int, inject_ms: float = 0.0, first_bad: int = 1) -> Analysis:
    """A 2-rank GPT job of 8 steps (2% kernel noise); with ``inject_ms``, a data-loading stall of that
    size on rank 0 in every step from ``first_bad`` on."""
    out = Path(tempfile.mkdtemp(prefix="oracle-diff-"))
    stalls = tuple(parse_injection(f"dataloader_stall@{s}:0={inject_ms:g}ms")
                   for s in range(first_bad, STEPS + 1)) if inject_ms else ()
    synthesize(out, SynthConfig(model="tiny", dp=2, steps=STEPS, seed=seed, injections=stalls))
    return analyze(read_trace(out))


def test_names_lose_what_changes_between_builds() -> None:
    assert normalized_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                           "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>)") == \
        "at::native::vectorized_elementwise_kernel"
    assert normalized_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == \
        "ncclKernel_AllReduce_RING_LL_Sum_float"
    assert normalized_name("Memcpy DtoH (Device -> Pageable)") == "Memcpy DtoH (Device -> Pageable)"
    assert normalized_name("ProfilerStep#12") == normalized_name("ProfilerStep#3")
    assert normalized_name("<img src=x>") == "<img src=x>"  # all brackets: kept whole, not emptied


def test_a_run_against_itself_is_unchanged() -> None:
    a = _synth(0)
    d = diff_runs(a, a)
    assert d.verdict == "unchanged" and d.delta_ms == 0 and d.comparability["level"] == "high"
    assert not d.moved["categories"] and not d.moved["findings"]


def test_noise_alone_is_no_change() -> None:
    d = diff_runs(_synth(0), _synth(1))
    assert d.verdict == "unchanged", d.headline()
    assert d.slower_than(5.0) is not None and d.slower_than(5.0) < 0.05


def test_a_stall_in_every_step_is_slower_and_data_loading_moved_most() -> None:
    base, new = _synth(0), _synth(1, inject_ms=1.5)  # on a step of about 3.3 ms
    d = diff_runs(base, new)
    assert d.verdict == "slower" and d.confidence is not None and d.confidence >= 0.95, d.headline()
    assert 1.2 <= d.delta_ms <= 1.8  # the stall, give or take the noise
    lo, hi = d.interval_pct
    assert 0 < lo <= d.delta_pct <= hi
    assert d.moved["categories"][0]["category"] == "data_loading" and d.moved["categories"][0]["delta_ms"] > 1.2
    # the reverse: NEW faster, by the same amount
    back = diff_runs(new, base)
    assert back.verdict == "faster" and back.delta_ms == pytest.approx(-d.delta_ms, rel=0.05)


def test_warm_up_and_outliers_are_set_aside_and_named() -> None:
    """A stall in the last two steps only: an outlier of the run, not its steady state."""
    one = _synth(1, inject_ms=60.0, first_bad=STEPS - 1)
    s = steady_steps(one)
    assert set(s.outliers) == {STEPS - 1, STEPS} and not set(s.steady) & set(s.outliers)
    d = diff_runs(_synth(0), one)
    assert d.verdict == "unchanged" and d.new["outliers"] == [STEPS - 1, STEPS]
    # the 60 ms stall's findings are of the outlier steps: set aside with them, not a finding that appeared
    assert any(f.step in (STEPS - 1, STEPS) and f.impact_ms > 50 for f in one.findings)
    assert all(abs(f["delta_ms"]) < 5 for f in d.moved["findings"]), d.moved["findings"]  # type: ignore[arg-type]


def test_different_jobs_on_different_gpus_are_marked_not_comparable() -> None:
    """HTA's trace-diff pair: rank 3 of an 8-A100 job against rank 1 of a 2-V100 job."""
    hta = REAL / "hta"
    control = analyze(read_trace(hta / "trace_diff_control", partial=True))
    test = analyze(read_trace(hta / "trace_diff_test", partial=True))
    d = diff_runs(control, test)
    c = d.comparability
    assert c["level"] == "low"
    assert any("hardware" in r for r in c["reasons"]) and any("world size" in r for r in c["reasons"])
    assert d.verdict in ("slower", "faster") and d.base["steady"] and d.new["steady"]


def test_the_compare_pair_states_its_comparability() -> None:
    """HTA's trace-compare pair: the test run has 3 more CPU ops and one all-reduce fewer."""
    hta = REAL / "hta"
    d = diff_runs(analyze(read_trace(hta / "trace_compare_base")), analyze(read_trace(hta / "trace_compare_test")))
    assert d.comparability["op_similarity"] < 1.0
    assert any("steady steps" in r for r in d.comparability["reasons"])  # two steps each: weak confidence
    assert d.verdict in ("unchanged", "slower", "faster")


def test_the_gpu_wait_the_trace_does_not_show_is_its_own_row_out_of_idle() -> None:
    """HTA's trace_compare_base: its GPU waits after each launch for work the trace does not hold (116.9 of
    117.1 ms); the attribution names that wait apart from idle, and its rows still sum to the wall."""
    hta = REAL / "hta"
    base, new = analyze(read_trace(hta / "trace_compare_base")), analyze(read_trace(hta / "trace_compare_test"))
    d = diff_runs(base, new)
    rows = {r["category"]: r for r in d.moved["categories"]}
    reports = [r for r in base.steps if r.step in steady_steps(base).steady]
    waits = sorted(untraced_wait_ns(base.graph, r) / 1e6 for r in reports)
    assert rows["untraced_wait"]["base_ms"] == round(float(np.median(waits)), 3) > 50
    assert d.moved["categories"][0]["category"] == "untraced_wait"  # what moved most is the untraced wait
    for r in reports:  # idle keeps what is left: every row of a step sums to its wall
        row = _breakdown_of(base, r)
        assert sum(row.values()) == pytest.approx(r.wall_ns / 1e6, abs=1e-6)
        assert row["idle"] == pytest.approx(r.breakdown_ns[Category.IDLE] / 1e6 - row["untraced_wait"], abs=1e-9)


def _breakdown_of(a: Analysis, r: StepReport) -> dict[str, float]:
    one = Steady(walls={r.step: (r.wall_ns, r.rank)}, steady=(r.step,), warmup=(), outliers=(), partial=())
    return _breakdown(a, one)


def test_captured_stall_against_the_clean_capture() -> None:
    """Real gloo captures of the same GPT job: a 150 ms data-loading stall in step 4 is an outlier of the
    run, named, and the steady steps alike."""
    clean = analyze(read_trace(DATA / "gloo_clean"))
    stalled = analyze(read_trace(DATA / "gloo_dataloader_stall"))
    d = diff_runs(clean, stalled)
    assert 4 in d.new["outliers"] and 4 not in d.base["outliers"]
    assert d.comparability["op_similarity"] > 0.9


def test_a_captured_pair_slower_by_its_stall() -> None:
    """Real gloo captures of one GPT job, the second with a 150 ms data-loading stall in every step: NEW
    is slower, by about the stall, and data loading is what moved most."""
    pair = DATA / "diff_pair"
    d = diff_runs(analyze(read_trace(pair / "base")), analyze(read_trace(pair / "stall")))
    assert d.verdict == "slower" and d.confidence is not None and d.confidence >= 0.95, d.headline()
    top = d.moved["categories"][0]
    assert top["category"] == "data_loading" and 120 <= top["delta_ms"] <= 180
    assert 100 <= d.delta_ms <= 250 and d.comparability["level"] in ("high", "medium")


def test_a_loader_with_workers_is_the_same_model_and_its_stall_went_away() -> None:
    """ResNet-50 on one GPU, DataLoader workers 0 against 4 (real Kineto traces): the single-process loader's
    own ops (collate, copies under its fetch) leave the trace with the workers, so they do not count against
    the model's ops; the launch-overhead findings of NEW's warm-up and outlier steps are set aside."""
    pair = DATA / "resnet50_loader_workers" / "june"
    if not pair.is_dir():
        pytest.skip(f"{pair} is not there")
    d = diff_runs(analyze(read_trace(pair / "nw0")), analyze(read_trace(pair / "nw4")))
    assert d.verdict == "faster" and d.delta_ms == pytest.approx(-52.252, abs=0.01), d.headline()
    assert d.comparability["op_similarity"] == 1.0 and d.comparability["level"] == "high", d.comparability
    assert d.new["warmup"] == [5] and d.new["outliers"] == [9]
    assert d.moved["findings"] == [{"category": "dataloader_stall", "ranks": [0], "change": "went away",
                                    "base_ms": 58.816, "new_ms": 0.0, "delta_ms": -58.816}]
