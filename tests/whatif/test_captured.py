"""What-if on real CPU captures (two gloo ranks training a small GPT): the matching fix ranked first for
every fault a capture injects, and a fix's prediction against the job captured again without its fault:
the closed loop on real time.

The verdicts of ``make test`` come from the captures committed under ``tests/data/gloo_*`` (recorded once
with their re-captures, ``tests/captured_data.py``), so they depend on the code alone. The same checks on
a capture taken now compare real times of two live runs on a shared machine: they are marked ``live``
(``make test-live``, run by hand) and keep their capture when they fail.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.capture.capture import capture, load_manifest
from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
from bottleneck_oracle.graphdb.playbook import read_playbook
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import Edit, EditKind, parse_edit
from bottleneck_oracle.vocabulary import Bottleneck
from bottleneck_oracle.whatif.optimize import optimize
from bottleneck_oracle.whatif.predict import baseline_ms, predict_whatif
from bottleneck_oracle.whatif.verify import rerun
from tests.captured_data import BY_INJECTION, STEP, captured, folder, recaptured_step_ms
from tests.captured_noise import injected, kept_on_failure, retaken

# the faults a committed capture holds with its re-capture
RECAPTURED = sorted(c.inject for c in BY_INJECTION.values() if c.recaptured)
BLOCKING = "exposed_communication@4=128MB"  # a blocking all-reduce: its fix is judged below


def _category(inject: str) -> str:
    return inject.split("@")[0]


def _clean_walls(a: Analysis, but: int) -> np.ndarray:
    steps = sorted({r.step for r in a.steps if (r.step, r.rank) not in a.partial_steps} - {but})
    return np.array([baseline_ms(a, s) for s in steps])


def _assert_fix_ranked_first(a: Analysis, category: str) -> None:
    plan = optimize(a, STEP, read_playbook(), budget=1)
    best = plan.candidates[0]
    ranked = [(str(c.edit), c.also, c.gain_ms) for c in plan.candidates]
    # the fix itself: a playbook remedy of the category (scale op=gemm x2 for slow compute) is not it
    assert best.edit.kind == EditKind.FIX and category in (best.category, *best.also), ranked
    assert best.gain_ms > 0.3 * plan.baseline_ms, ranked


def _assert_predicts(predicted: float, before: np.ndarray, measured: float, walls: np.ndarray) -> None:
    """A fix's prediction against the re-captured step, within the noise of the two runs: how much the
    re-capture's clean steps spread, and how far the machine's speed drifted between the two captures
    (the prediction stands on the first one's clean work)."""
    spread = float(np.median(np.abs(walls - np.median(walls)))) / float(np.median(walls))
    drift = abs(float(np.median(before)) - float(np.median(walls))) / float(np.median(walls))
    error = abs(predicted - measured) / measured
    assert error <= 0.10 + 3 * spread + drift, (predicted, measured, spread, drift)


@pytest.mark.parametrize("inject", RECAPTURED)
def test_optimize_ranks_the_matching_fix_first(inject: str) -> None:
    _assert_fix_ranked_first(captured(BY_INJECTION[inject].name), _category(inject))


def test_a_slow_ranks_compute_is_fixed_not_only_the_wait_it_made() -> None:
    """A capture kept from a live run on a loaded machine (issue 25): rank 1 computed 4x slower in step 4
    and rank 0 waited for it. Its straggler finding came out larger than its slow compute, and the fix
    ranked first was the straggler's, which removes only rank 0's wait (predicted 490 ms of 824). The
    fix of what made rank 1 late must come first, and predict the step back among its clean peers."""
    _assert_slow_rank_fixed(captured("gloo_slow_rank_loaded"))


def test_a_wait_whose_spans_closed_late_is_given_back_by_the_fix() -> None:
    """A capture kept from a live run on a loaded machine (issue 25): rank 0 waited 151 ms for rank 1's
    4x slower compute, and went on 3.7 ms before the gloo workers closed their spans. Read as rank 0's
    own idle time, the wait stayed in the replay: the fix gained 52 ms of a 404 ms step whose clean peers
    take 225."""
    _assert_slow_rank_fixed(captured("gloo_slow_rank_late_spans"))


def _assert_slow_rank_fixed(a: Analysis) -> None:
    plan = optimize(a, STEP, read_playbook(), budget=1)
    best = plan.candidates[0]
    assert (best.edit.kind, best.category) == (EditKind.FIX, Bottleneck.SLOW_COMPUTE), best
    assert Bottleneck.STRAGGLER_RANK in best.also  # the straggler is the same change
    clean = _clean_walls(a, STEP)
    predicted = plan.baseline_ms - best.gain_ms
    assert abs(predicted - float(np.median(clean))) <= 0.15 * float(np.median(clean)), (predicted, clean)


@pytest.mark.parametrize("inject", [i for i in RECAPTURED if i != BLOCKING])
def test_a_fix_predicts_the_recaptured_step(inject: str) -> None:
    name = BY_INJECTION[inject].name
    a = captured(name)
    (truth,) = load_manifest(folder(name)).ground_truth
    predicted = predict_whatif(a, STEP, [Edit.fix(_category(inject), STEP)]).best_ms
    before = _clean_walls(a, STEP)
    assert baseline_ms(a, STEP) - float(np.median(before)) > 0.5 * (truth.injected_ms or 0.0)  # the fault was there
    again = recaptured_step_ms(name)
    walls = np.array([ms for step, ms in sorted(again.items()) if step != STEP])
    _assert_predicts(predicted, before, again[STEP], walls)


def test_a_blocking_all_reduce_is_exposed_communication_and_its_removal_predicts_the_recapture() -> None:
    """The main thread's wait on a blocking 128 MB gloo all-reduce is communication, not an idle host: the
    step's cause on its ranks, and fixing it, removing the all-reduce or making it twice as fast predict
    what the job re-captured without it measures. The re-capture has no all-reduce in any step, so each
    of its steps is a sample of the fixed step: the prediction is judged against their median (its
    step 4 alone, the fastest of them, is 11% below it on this take)."""
    name = BY_INJECTION[BLOCKING].name
    a = captured(name)
    cause = a.cause(STEP)
    assert cause is not None and cause.category == Bottleneck.EXPOSED_COMMUNICATION
    fixed = predict_whatif(a, STEP, [Edit.fix("exposed_communication", STEP)]).best_ms
    removed = predict_whatif(a, STEP, [parse_edit(f"remove op=allreduce step={STEP}")]).best_ms
    faster = predict_whatif(a, STEP, [parse_edit(f"scale op=allreduce step={STEP} x2")]).best_ms
    base = baseline_ms(a, STEP)
    assert removed == pytest.approx(fixed, rel=0.05)  # the fix is the all-reduce gone
    assert 0.4 < (base - faster) / (base - removed) < 0.6  # twice as fast: about half of it saved
    truth = float(np.median(list(recaptured_step_ms(name).values())))
    assert abs(fixed - truth) / truth <= 0.15, (fixed, truth)


# --- live: the same checks on a capture taken now (make test-live) -------------------------------------------

# steps of about 110 ms on a quiet machine, so a few ms of scheduling noise is a few percent
MODEL = {"layers": 4, "d_model": 128, "heads": 4, "seq_len": 64, "batch_size": 16, "vocab": 512, "timeout_s": 300}
# what a fault costs here, for the check that the run's noise does not hide it (None: its size in ms)
LIVE_FAULTS = {
    "dataloader_stall@4:0=150ms": None, "straggler_rank@4:1=150ms": None, "host_pause@4:0=150ms": None,
    "checkpoint_stall@4:1=64MB": 100.0, "slow_compute@4:1=4x": 100.0,
}


def _take(out: Path, inject: str) -> Analysis:
    capture(out, CaptureConfig(ranks=2, steps=6, injections=(parse_injection(inject),), **MODEL))
    return analyze(read_trace(out))


@cache
def _live(inject: str, root: Path) -> Analysis:
    return injected(root / _category(inject), inject, _take, cost_ms=LIVE_FAULTS[inject])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("captured")


@pytest.mark.live
@pytest.mark.parametrize("inject", sorted(LIVE_FAULTS))
def test_live_optimize_ranks_the_matching_fix_first(root: Path, inject: str) -> None:
    a = _live(inject, root)
    with kept_on_failure(Path(a.graph.trace.ranks[0].path).parent, f"optimize-{inject}"):
        _assert_fix_ranked_first(a, _category(inject))


@pytest.mark.live
@pytest.mark.parametrize("inject", [i for i in sorted(LIVE_FAULTS) if not i.startswith("slow_compute")])
def test_live_fix_predicts_the_recaptured_step(root: Path, inject: str) -> None:
    category = _category(inject)
    a = _live(inject, root)
    out = Path(a.graph.trace.ranks[0].path).parent
    predicted = predict_whatif(a, STEP, [Edit.fix(category, STEP)]).best_ms
    before = _clean_walls(a, STEP)
    assert baseline_ms(a, STEP) - float(np.median(before)) > 100  # the fault was there

    def matches(again: Analysis) -> None:  # and it is gone
        with kept_on_failure(out, f"recapture-{inject}"):
            _assert_predicts(predicted, before, baseline_ms(again, STEP), _clean_walls(again, STEP))

    # one step of a re-capture is one sample of a shared machine: a take that stalled there is taken again
    retaken(lambda _: rerun(out, [Edit.fix(category, STEP)]), matches)
