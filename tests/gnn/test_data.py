from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bottleneck_oracle.gnn.data import FEATURES, node_ranks, step_graphs
from bottleneck_oracle.graph.op_classes import op_class_mask
from bottleneck_oracle.graph.types import NodeKind
from tests.analysis.synth_cases import synth_case

_C = {name: i for i, name in enumerate(FEATURES)}


def _case():  # type: ignore[no-untyped-def]
    a, _ = synth_case("tiny", dp=2)
    return a


def test_features_do_not_change_when_the_labels_are_permuted() -> None:
    a = _case()
    rng = np.random.default_rng(0)
    n = len(a.graph)
    shuffled = tuple(replace(r, path_node=rng.integers(n, size=len(r.path_node)),
                             path_dur_ns=rng.permutation(r.path_dur_ns)) for r in a.steps)
    permuted = replace(a, steps=shuffled, slack_ns=rng.permutation(a.slack_ns))
    before, after = step_graphs(a), step_graphs(permuted)
    assert [g.step for g in before] == [g.step for g in after] == [1, 2, 3, 4]
    for g, h in zip(before, after):
        assert np.array_equal(g.x, h.x) and g.edges.keys() == h.edges.keys()
        assert all(np.array_equal(g.edges[k], h.edges[k]) for k in g.edges)
    assert any(not np.array_equal(g.on_path, h.on_path) for g, h in zip(before, after))  # the labels did move


def test_labels_come_from_the_slowest_ranks_critical_path() -> None:
    a = _case()
    for g in step_graphs(a):
        reports = [r for r in a.steps if r.step == g.step]
        slowest = max(reports, key=lambda r: r.wall_ns)
        assert g.step_ms == pytest.approx(slowest.wall_ns / 1e6)
        on_path = set(slowest.path_node[slowest.path_node >= 0].tolist())
        assert set(g.node[g.on_path].tolist()) == on_path & set(g.node.tolist())
        assert 0.5 < g.share.sum() <= 1.0 + 1e-6 and (g.share[~g.on_path] == 0).all()


def test_features_read_the_trace() -> None:
    a = _case()
    g = step_graphs(a)[0]
    assert g.x.shape == (len(g), len(FEATURES)) and np.isfinite(g.x).all()
    graph = a.graph
    dur_us = graph.dur_ns[g.node] / 1e3
    assert np.allclose(np.expm1(g.x[:, _C["log_dur_us"]]), dur_us, rtol=1e-5, atol=1e-3)
    assert np.array_equal(node_ranks(g.x), graph.rank[g.node])
    gemm = op_class_mask(graph, "gemm")[g.node] & (graph.kind[g.node] == NodeKind.KERNEL)
    assert gemm.sum() > 0 and (g.x[gemm, _C["class_gemm"]] == 1).all()
    assert (g.x[:, [_C[f"hash_{i}"] for i in range(16)]].sum(1) == 1).all()
    assert "ProfilerStep#" not in {graph.trace.strings[n] for n in graph.name[g.node]}  # the step itself is no node
    with pytest.raises(ValueError):
        op_class_mask(graph, "nonsense")


def test_overlap_is_the_time_compute_and_communication_ran_together_on_a_rank() -> None:
    a, _ = synth_case("gpt2-small", dp=2)  # DDP all-reduces overlap backward kernels
    graph = a.graph
    g = step_graphs(a)[0]
    overlap_us = np.expm1(g.x[:, _C["log_overlap_us"]].astype(np.float64))
    comm = graph.kind[g.node] == NodeKind.COMM
    kernels = np.flatnonzero(graph.kind[g.node] == NodeKind.KERNEL)
    # by brute force for a few kernels: the union of their rank's communication intervals they cover
    for i in kernels[:: max(len(kernels) // 20, 1)]:
        n = g.node[i]
        start, end = graph.start_ns[n], graph.start_ns[n] + graph.dur_ns[n]
        mine = g.node[comm & (graph.rank[g.node] == graph.rank[n])]
        covered = np.zeros(int(end - start), dtype=bool)
        for m in mine:
            lo, hi = max(graph.start_ns[m], start), min(graph.start_ns[m] + graph.dur_ns[m], end)
            covered[int(lo - start):int(max(hi - start, lo - start))] = True
        assert overlap_us[i] == pytest.approx(covered.sum() / 1e3, abs=1e-2)
    assert (overlap_us[comm] > 0).any() and (overlap_us[~comm & (graph.kind[g.node] != NodeKind.KERNEL)] == 0).all()


def test_global_start_is_comparable_across_ranks() -> None:
    a = _case()
    g = step_graphs(a)[0]
    start_ns = a.graph.start_ns[g.node].astype(np.float64)
    gstart_ns = g.x[:, _C["gstart_ms"]].astype(np.float64) * 1e8
    assert gstart_ns.min() >= -1e3 and np.allclose(gstart_ns - start_ns, (gstart_ns - start_ns).mean(), atol=2e3)


def test_a_step_too_large_keeps_its_last_ranks() -> None:
    a = _case()
    whole = step_graphs(a)[0]
    ranks = a.graph.rank[whole.node]
    per_rank = int(np.bincount(ranks).max())
    cut = step_graphs(a, max_nodes=len(whole) - 1)[0]
    assert len(cut) <= len(whole) - 1 and len(set(a.graph.rank[cut.node].tolist())) == 1
    # the rank kept is the one that ends last, and the path is labelled on it
    end = a.graph.start_ns[whole.node] + a.graph.dur_ns[whole.node]
    assert a.graph.rank[cut.node][0] == ranks[np.argmax(end)]
    assert cut.on_path.any() and cut.step_ms == whole.step_ms
    assert step_graphs(a, max_nodes=per_rank - 1) == []
