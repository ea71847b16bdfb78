"""Tests for gnn/scan_model.py: the graph model run rank by rank over a scan gives, on every real, public and
captured multi-rank folder and on synthetic jobs whose clocks disagree, each step's predicted wall time and the
nodes its walk visits as ``Predictor.predict`` gives them on the whole job."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.executor import LocalExecutor, RayExecutor
from bottleneck_oracle.gnn import scan_model as scan_model_module
from bottleneck_oracle.gnn.data import GraphColumns
from bottleneck_oracle.gnn.predict import SHIPPED_CHECKPOINT, Predictor
from bottleneck_oracle.gnn.scan_model import ScanModel, model_rounds, scan_model
from bottleneck_oracle.graph.types import EdgeType, Role
from bottleneck_oracle.job.scan import scan
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA, REAL, REPO, counted_reads, one_ray_task_killed, run_oracle
from tests.job.test_scan import _job
from tests.replay.test_rank_replay import _folders


def _assert_predicts_as_the_whole_job(a: Analysis, m: ScanModel) -> None:
    want = {p.step: p for p in Predictor().predict(a)}
    assert [s.step for s in m.steps] == sorted(want)
    for s in m.steps:
        p = want[s.step]
        walked = p.on_path >= 0.5
        assert np.array_equal(s.node, p.node[walked]), s.step  # the same walk, node for node
        assert s.step_ms == pytest.approx(p.step_ms, rel=1e-5)
        np.testing.assert_allclose(s.share, p.share[walked], atol=1e-5)
        np.testing.assert_allclose(s.on_path, p.on_path[walked], atol=1e-5)
        assert np.array_equal(s.rank, a.graph.rank[s.node])
        assert list(s.name) == [a.graph.trace.strings[i] for i in a.graph.name[s.node]]


@pytest.mark.parametrize("folder", [*_folders(), "skewed", "skewed_pipeline"], ids=str)
def test_the_model_rank_by_rank_is_the_model_on_the_whole_job(folder: Path | str) -> None:
    folder = _job(folder) if isinstance(folder, str) else folder
    s = scan([folder], LocalExecutor(2), critical_paths=False, then=model_rounds())
    assert isinstance(s.then, ScanModel)
    _assert_predicts_as_the_whole_job(analyze(read_trace(folder)), s.then)


def _job_cross_edges(a: Analysis) -> set[tuple[int, int, int]]:
    """The whole job's graph's edges between two ranks whose ends are in one step and the model sees."""
    g = a.graph
    seen = (GraphColumns.of(g).ntype >= 0) & (g.role != Role.STEP)
    src, dst = g.edge_src.astype(np.int64), g.edge_dst.astype(np.int64)
    pick = (g.rank[src] != g.rank[dst]) & (g.step[src] == g.step[dst]) & (g.step[src] >= 0) & seen[src] & seen[dst]
    return set(zip(src[pick].tolist(), dst[pick].tolist(), g.edge_type[pick].tolist()))


@pytest.mark.parametrize("folder", [DATA / "pipeline_eager_send", REAL / "param" / "dlrm_8rank_kineto",
                                    REPO / "examples" / "gpt_2rank", "skewed_pipeline"], ids=str)
def test_the_edges_between_ranks_are_the_job_graph_s(folder: Path | str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collective's last arrival to each other member, and a send to the node that waited for it, as the job's
    graph has them (a send whose wait runs the other way dropped): what the halos carry."""
    folder = _job(folder) if isinstance(folder, str) else folder
    got: list[tuple[int, int, int]] = []
    cross = scan_model_module._cross_edges

    def spy(kept, first):  # type: ignore[no-untyped-def]
        edges = cross(kept, first)
        base = dict(zip((s.rank for s in kept.summaries), kept.base))
        got.extend((base[sr] + sn, base[dr] + dn, et) for sr, sn, dr, dn, et, *_ in edges)
        return edges

    monkeypatch.setattr(scan_model_module, "_cross_edges", spy)
    scan([folder], LocalExecutor(1), critical_paths=False, then=model_rounds())
    a = analyze(read_trace(folder))
    assert len(got) == len(set(got)) and set(got) == _job_cross_edges(a)
    assert any(t == EdgeType.COLLECTIVE for _, _, t in got)


def test_the_model_s_rounds_read_the_traces_the_nodes_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = counted_reads(monkeypatch)
    s = scan([DATA / "gloo_checkpoint_stall"], LocalExecutor(1), then=model_rounds())
    assert isinstance(s.then, ScanModel) and s.then.steps and s.findings
    assert len(reads) >= len(s.ranks) and set(reads.values()) == {1}


def test_oracle_scan_model_prints_and_gives_the_model_s_steps() -> None:
    folder = REPO / "examples" / "gpt_2rank"
    done = run_oracle("scan", folder, "--no-paths", "--model", "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)["model"]
    a = analyze(read_trace(folder))
    want = {p.step: p for p in Predictor().predict(a)}
    assert [r["step"] for r in got["steps"]] == sorted(want)
    for r in got["steps"]:
        assert r["model_ms"] == pytest.approx(want[r["step"]].step_ms, abs=1e-3)
        assert r["walk_nodes"] == int((want[r["step"]].on_path >= 0.5).sum()) and r["top"]
        assert r["recorded_ms"] == pytest.approx(max(x.wall_ns for x in a.steps if x.step == r["step"]) / 1e6, abs=1e-3)
    shown = run_oracle("scan", folder, "--no-paths", "--model")
    assert shown.returncode == 0 and "The graph model, rank by rank" in shown.stdout


@pytest.mark.slow
def test_the_model_on_ray_with_a_worker_killed_is_the_whole_job_s(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    """On a Ray of two workers, one killed in the middle of a model round: Ray runs its task again, which goes on
    from the rank's state or builds it again, to the same answer."""
    folder = REAL / "param" / "dlrm_8rank_kineto"
    killed: list[int] = []

    def then(kept, found):  # type: ignore[no-untyped-def]
        with one_ray_task_killed(after_s=0.05) as pids:
            out = scan_model(kept, found, str(SHIPPED_CHECKPOINT))
        killed.extend(pids)
        return out

    s = scan([folder], RayExecutor(), critical_paths=False, then=then)
    assert killed, "no worker was caught running a model round"
    assert isinstance(s.then, ScanModel)
    _assert_predicts_as_the_whole_job(analyze(read_trace(folder)), s.then)
