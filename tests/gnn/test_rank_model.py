"""Tests for gnn/rank_model.py: a rank's part of each step reads the job's frame as the whole job's step graph
does, and its halo (its neighbours on other ranks) is what couples it to them."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.executor import LocalExecutor
from bottleneck_oracle.gnn import scan_model as scan_model_module
from bottleneck_oracle.gnn.data import COLUMN, node_ranks, step_graphs
from bottleneck_oracle.gnn.predict import Predictor
from bottleneck_oracle.gnn.rank_model import RankSteps
from bottleneck_oracle.gnn.scan_model import model_rounds
from bottleneck_oracle.job.scan import scan
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL

FOLDER = REAL / "param" / "dlrm_8rank_kineto"


def test_each_rank_spans_its_steps_as_the_job_s_step_graph_says(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RankSteps] = []
    steps = scan_model_module.rank_steps

    def spy(graph, job, arg, state):  # type: ignore[no-untyped-def]
        seen.append(steps(graph, job, arg, state))
        return seen[-1]

    monkeypatch.setattr(scan_model_module, "rank_steps", spy)
    s = scan([FOLDER], LocalExecutor(1), critical_paths=False, then=model_rounds())
    assert len(seen) == len(s.ranks)
    for sg in step_graphs(analyze(read_trace(FOLDER))):
        rank = node_ranks(sg.x)
        for r, got in zip(s.ranks, seen):
            want = np.expm1(sg.x[rank == r, COLUMN["log_rank_span_us"]].astype(np.float64))
            at = np.flatnonzero(got.step == sg.step)
            assert len(at) == 1 and want.max() == pytest.approx(got.span_us[at[0]], rel=1e-5)


def test_without_its_halo_a_rank_is_not_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """The halo's embeddings zeroed: the ranks no longer hear each other, and the model says another thing."""
    halo = scan_model_module._halo

    def deaf(boundary, lk, width):  # type: ignore[no-untyped-def]
        h, x = halo(boundary, lk, width)
        return np.zeros_like(h), x

    monkeypatch.setattr(scan_model_module, "_halo", deaf)
    s = scan([FOLDER], LocalExecutor(1), critical_paths=False, then=model_rounds())
    want = {p.step: p for p in Predictor().predict(analyze(read_trace(FOLDER)))}
    moved = 0.0
    for m in s.then.steps:  # type: ignore[attr-defined]
        p = want[m.step]
        walked = p.on_path >= 0.5
        if not np.array_equal(m.node, p.node[walked]):
            return  # another walk
        moved = max(moved, abs(np.log(m.step_ms / p.step_ms)), float(np.abs(m.on_path - p.on_path[walked]).max()))
    assert moved > 1e-2  # the whole job's to 1e-5 with the halo (test_scan_model)


def test_a_round_that_finds_no_state_builds_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round that runs on another node than the rank's last finds none of its state: it builds the step graphs
    and the layers before again, to the same answer."""
    from bottleneck_oracle.gnn import rank_model

    kept = scan([FOLDER], LocalExecutor(1), critical_paths=False, then=model_rounds())
    monkeypatch.setattr(rank_model, "_load", lambda state, layers: None)
    again = scan([FOLDER], LocalExecutor(1), critical_paths=False, then=model_rounds())
    for a, b in zip(kept.then.steps, again.then.steps):  # type: ignore[attr-defined]
        assert np.array_equal(a.node, b.node) and a.step_ms == pytest.approx(b.step_ms, rel=1e-6)
        np.testing.assert_allclose(a.share, b.share, atol=1e-6)
