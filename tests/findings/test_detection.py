"""Every bottleneck injected into a synthetic job is found: the right category, step and rank.

The generator's ground truth says what was injected where; the analysis sees only the traces.
"""

from __future__ import annotations

import pytest

from tests.analysis.synth_cases import synth_case

DP2 = {"model": "gpt2-small", "dp": 2}
PP2 = {"model": "gpt2-small", "pp": 2, "microbatches": 4}
CASES = [
    ("dataloader_stall@3:1=40ms", DP2, (3, (1,))),
    ("straggler_rank@3:1=40ms", DP2, (3, (1,))),
    ("host_pause@3:1=40ms", DP2, (3, (1,))),
    ("exposed_communication@3=8192MB", {**DP2, "hardware": "A100"}, None),
    ("slow_compute@3:1=3x", DP2, (3, (1,))),
    ("host_sync@3:1=20ms", DP2, (3, (1,))),
    ("launch_overhead@3:1=8x", DP2, (3, (1,))),
    ("checkpoint_stall@3:1=256MB", DP2, (3, (1,))),
    ("pipeline_bubble@3=20ms", PP2, None),
]


@pytest.mark.parametrize("inject,job,where", CASES, ids=[c[0].split("@")[0] for c in CASES])
def test_injected_bottleneck_is_found(inject: str, job: dict, where: tuple | None) -> None:
    a, manifest = synth_case(inject=inject, **job)
    (truth,) = manifest.ground_truth
    found = [f for f in a.findings if f.category.value == truth.category]
    assert found, [(f.category.value, f.step, f.ranks) for f in a.findings]
    f = max(found, key=lambda f: f.impact_ms)
    assert f.step == truth.step
    if where is not None:
        assert (f.step, f.ranks) == where
    assert f.impact_ms == pytest.approx(truth.injected_ms, rel=0.35)
    assert {s.step for s in a.slow_steps} >= {truth.step}


@pytest.mark.parametrize("inject", ["straggler_rank@3:1=40ms", "dataloader_stall@3:1=40ms", "host_sync@3:1=20ms"])
def test_late_rank_is_listed_right_after_what_made_it_late(inject: str) -> None:
    a, manifest = synth_case(inject=inject, **DP2)
    cause, late = a.findings[:2]
    assert (late.category.value, late.step, late.ranks) == ("straggler_rank", 3, (1,))
    assert cause.category.value != "straggler_rank"
    assert (cause.step, cause.ranks) == (3, (1,))
    assert cause.impact_ms == pytest.approx(late.impact_ms, rel=0.1)
