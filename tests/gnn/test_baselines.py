from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.gnn.baselines import (
    AggregateRegressors,
    aggregates,
    compute_sum_ms,
    duration_score,
)
from bottleneck_oracle.gnn.data import FEATURES, step_graphs
from bottleneck_oracle.gnn.edits import edit_features
from bottleneck_oracle.graph.types import NodeKind
from tests.analysis.synth_cases import synth_case


def test_compute_sum_is_the_slowest_ranks_kernel_time() -> None:
    a, _ = synth_case("tiny", dp=2)
    g = step_graphs(a)[0]
    graph = a.graph
    kernels = graph.kind[g.node] == NodeKind.KERNEL
    per_rank = {r: graph.dur_ns[g.node[kernels & (graph.rank[g.node] == r)]].sum() / 1e6 for r in (0, 1)}
    assert compute_sum_ms(g) == pytest.approx(max(per_rank.values()), rel=1e-4)
    assert compute_sum_ms(edit_features(g, kernels, 2.0)) == pytest.approx(compute_sum_ms(g) / 2, rel=1e-4)


def test_aggregates_see_the_edit() -> None:
    a, _ = synth_case("tiny", dp=2)
    g = step_graphs(a)[0]
    gemm = g.x[:, FEATURES.index("class_gemm")] == 1
    row, edited = aggregates(g), aggregates(edit_features(g, gemm, 2.0))
    assert row.shape == edited.shape and np.isfinite(row).all()
    assert not np.array_equal(row, edited)
    assert np.array_equal(duration_score(g), g.x[:, FEATURES.index("dur_ms")])


def test_regressors_fit_what_they_are_given() -> None:
    a, _ = synth_case("tiny", dp=2)
    graphs = step_graphs(a)
    rng = np.random.default_rng(0)
    rows = np.stack([aggregates(g) for g in graphs] * 20) + rng.normal(0, 1e-3, (80, len(aggregates(graphs[0]))))
    target = np.log(np.array([g.step_ms for g in graphs] * 20))
    fitted = AggregateRegressors(rows, target)
    for g in graphs:
        assert fitted.predict(g)["gbt"] == pytest.approx(g.step_ms, rel=0.1)
        assert set(fitted.predict(g)) == {"mlp", "gbt"}


def test_fit_kappa_recovers_one_constant_from_what_replay_missed() -> None:
    from bottleneck_oracle.gnn.baselines import fit_kappa

    rng = np.random.default_rng(0)
    lever = rng.uniform(-3, 0, 200)  # ms: a faster all-reduce overlaps less
    missed = 0.3 * lever + rng.normal(0, 0.01, 200)
    assert fit_kappa(lever, missed) == pytest.approx(0.3, abs=0.01)
    assert fit_kappa(np.zeros(3), np.ones(3)) == 0.0  # a CPU job: no lever, nothing to fit
