"""The what-if analysis against the study's published results on its three jobs: S, each step's S, the
attribution to DP ranks, stages and op types (overall and per step), and the shares M_W and M_S."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bottleneck_oracle.executor import LocalExecutor
from bottleneck_oracle.graph.pipeline import build_job_graph
from bottleneck_oracle.job.stragglers import analyze_stragglers, even_work, peer_own, typical_own
from bottleneck_oracle.traces.op_table import COMPUTE, read_op_table
from tests.conftest import STRAGGLERS

JOBS = ("AR", "SE", "ST")
LEADING = {"AR": ("0", "0", "backward-compute"), "SE": ("8", "1", "backward-compute"),
           "ST": ("1", "3", "forward-compute")}


@pytest.fixture(scope="module")
def analyses():  # type: ignore[no-untyped-def]
    return {job: analyze_stragglers(build_job_graph(read_op_table(STRAGGLERS / job))) for job in JOBS}


def _published(job: str, name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((STRAGGLERS / job / f"{name}.json").read_text())


@pytest.mark.parametrize("job", JOBS)
def test_slowdown_and_step_times_match_the_published_ones(analyses, job: str) -> None:  # type: ignore[no-untyped-def]
    a, r = analyses[job], _published(job, "result")
    assert a.slowdown == pytest.approx(r["blocking_slowdown"], abs=1e-5)
    for key, run in (("step_t_base", a.recorded), ("step_t_nodelay", a.no_gaps), ("step_t_noblk", a.ideal)):
        published = np.array([r[key][str(s)] for s in a.graph.steps])
        assert np.allclose(run.step_ns / 1e9, published, rtol=1e-6), key
    for step, value in r["blocking_step_slowdown"].items():
        assert a.step_slowdown[int(step)] == pytest.approx(value, abs=1e-5)
    assert a.replay_residual < 1e-9


@pytest.mark.parametrize("job", JOBS)
def test_attribution_matches_overall_and_names_the_same_leaders(analyses, job: str) -> None:  # type: ignore[no-untyped-def]
    a, r = analyses[job], _published(job, "result")
    for mine, key in ((a.by_dp_rank, "dp_rank"), (a.by_stage, "stage"), (a.by_op_type, "optype")):
        published = r[f"blocking_decompose_by_{key}"]
        assert set(mine) == set(published), key
        assert max(abs(mine[k] - v) for k, v in published.items()) < 1e-5, key
    assert (next(iter(a.by_dp_rank)), next(iter(a.by_stage)), next(iter(a.by_op_type))) == LEADING[job]


def test_attribution_per_step_matches_too(analyses) -> None:  # type: ignore[no-untyped-def]
    a, r = analyses["SE"], _published("SE", "result")
    per_step = r["blocking_decompose_by_dp_rank_per_step"]
    worst = max(abs(a.step_by_dp_rank[int(s)][k] - v) for s, d in per_step.items() for k, v in d.items())
    assert worst < 1e-5


@pytest.mark.parametrize("job", JOBS)
def test_worker_and_stage_shares_match_the_published_mw_and_ms(analyses, job: str) -> None:  # type: ignore[no-untyped-def]
    a, mw, ms = analyses[job], _published(job, "mw"), _published(job, "ms")
    assert a.worker_share.removed == pytest.approx(mw["Mw"], abs=1e-5)
    assert a.worker_share.added == pytest.approx(mw["add"], abs=1e-5)
    assert a.stage_share.removed == pytest.approx(ms["Ms"], abs=1e-5)
    assert a.worker_share.without.mean_ns / 1e9 == pytest.approx(mw["trem"], rel=1e-6)


def test_forked_processes_give_the_same_attribution(analyses) -> None:  # type: ignore[no-untyped-def]
    g = analyses["ST"].graph
    forked = analyze_stragglers(g, LocalExecutor(2))
    assert forked.by_dp_rank == analyses["ST"].by_dp_rank and forked.by_op_type == analyses["ST"].by_op_type


def test_typical_peer_and_even_times_keep_what_each_promises(analyses) -> None:  # type: ignore[no-untyped-def]
    g = analyses["ST"].graph
    own = g.recorded_transfers()
    code, stage = g.column(g.table.optype), g.column(g.table.stage)
    typical, peer, even = typical_own(g, own), peer_own(g, own, np.zeros(len(own), bool)), even_work(g, own)
    forward = code == COMPUTE[0]
    assert np.unique(typical[forward]).size == 1 and abs(typical[forward][0] - own[forward].mean()) <= 1
    last = forward & (stage == 3)
    assert np.unique(peer[last]).size == 1 and peer[last][0] == np.rint(np.median(own[last]))
    assert peer[last][0] > peer[forward & (stage == 0)][0]  # the long stage stays long for its peers
    assert np.array_equal(even[~np.isin(code, COMPUTE)], own[~np.isin(code, COMPUTE)])
    assert abs(even[last].sum() - own[last].sum()) <= last.sum()  # work moved, not removed
