"""Tests for replay/rank_replay.py: a what-if replayed one rank at a time, each rank's graph reduced to its boundary,
gives the job's replay to the nanosecond: on every real, public and captured multi-rank folder, on synthetic jobs
whose clocks disagree and pipelines, with edits of every rank or of one, that speed up, slow down and remove."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.executor import LocalExecutor
from bottleneck_oracle.graph import _kernels
from bottleneck_oracle.graph.longest_path import index_edges, longest_path
from bottleneck_oracle.job import scan as scan_module
from bottleneck_oracle.job.scan import scan
from bottleneck_oracle.replay.compile import compile_edits
from bottleneck_oracle.replay.engine import replay, weights_with
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
from tests.conftest import DATA, REAL, counted_reads
from tests.job.test_scan import _job, _job_replay
from tests.test_executor import multi_rank_folders

EDITS = ("scale op=allreduce x2", "scale op=gemm x2", "remove op=allreduce", "scale rank=1 x3",
         "scale kind=comm rank=0 x0.5", "scale op=sendrecv rank=0 x4", "set op=gemm 0.01")


def _folders() -> list[Path]:
    return [f for f in multi_rank_folders() if f.name not in ("trace_filter", "dlrm_8rank_et")]  # partial; no timings


@pytest.mark.parametrize("folder", [*_folders(), "skewed", "skewed_pipeline", "paused_pipeline"], ids=str)
def test_a_scan_replays_every_edit_as_the_job_s_graph(folder: Path | str) -> None:
    folder = _job(folder) if isinstance(folder, str) else folder
    a = analyze(read_trace(folder))
    for text in EDITS:
        want = _job_replay(a, text)
        if want is None:
            with pytest.raises(ConfigError, match="the selector picks no node of this trace"):
                scan([folder], LocalExecutor(2), critical_paths=False, edits=[parse_edit(text)])
            continue
        s = scan([folder], LocalExecutor(2), critical_paths=False, edits=[parse_edit(text)])
        assert s.whatif is not None and s.whatif.after_ns == want, text


def test_a_wait_on_another_rank_s_send_takes_the_sender_s_speed_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a pipeline of gloo sends, a receive here waits on a send there: edited on the sender's rank only, the
    wait is as much shorter as the send."""
    seen = []
    join = scan_module.scan_whatif

    def spy(edits, replays, shift, instances):  # type: ignore[no-untyped-def]
        seen.extend(replays)
        return join(edits, replays, shift, instances)

    monkeypatch.setattr(scan_module, "scan_whatif", spy)
    folder = DATA / "pipeline_eager_send"
    text = "scale op=sendrecv rank=1 x4"
    s = scan([folder], LocalExecutor(1), critical_paths=False, edits=[parse_edit(text)])
    assert s.whatif is not None and s.whatif.after_ns == _job_replay(analyze(read_trace(folder)), text)
    by_rank = {r.rank: r for r in seen}
    via = [(r.via_rank, r.via_node) for r in seen if len(r.via_rank)]
    assert via and all(by_rank[int(k)].send_speedup[np.searchsorted(by_rank[int(k)].send_node, n)] == 4.0
                       for ranks, nodes in via for k, n in zip(ranks, nodes))
    assert sum(len(r.wait_dst) for r in seen) > 10  # and waits on sends matched to no instance


def test_every_step_s_replay_is_the_job_wide_replay_of_the_whole_graph() -> None:
    folder = DATA / "gloo_straggler_rank"
    a = analyze(read_trace(folder))
    edit = parse_edit("scale op=allreduce x2")
    s = scan([folder], LocalExecutor(2), edits=[edit])
    assert s.whatif is not None
    job = replay(a, [], weight=weights_with(a.points, compile_edits(a, [edit], 2).speedup))
    assert {(int(st), int(rk)): int(w) for st, rk, w in zip(job.step, job.rank, job.after_ns)} == s.whatif.after_ns
    assert s.whatif.touched == (int(compile_edits(a, [edit], 2).touched[0]),)
    walls = {(r.step, r.rank): r.wall_ns for r in a.steps}
    assert sum(s.whatif.after_ns.values()) < sum(walls.values())
    assert list(s.findings) == list(a.findings)  # the last round ran both


def test_edits_a_scan_cannot_replay_are_refused_before_reading() -> None:
    with pytest.raises(ConfigError, match=r"edit fix host_pause.*a scan replays node edits only .* oracle whatif"):
        scan([Path("/nonexistent")], LocalExecutor(1), edits=[parse_edit("fix host_pause")])


@pytest.mark.parametrize("seed", range(6))
def test_a_graph_reduced_to_any_boundary_keeps_its_longest_paths(seed: int) -> None:
    """Where every point that starts a path is a boundary point (a rank's source is), the longest path to each
    boundary point over the reduced graph is the whole graph's."""
    rng = np.random.default_rng(seed)
    n = 400
    u, v = np.triu_indices(n, k=1)
    keep = rng.random(len(u)) < 0.02
    src, dst = u[keep], v[keep]
    w = rng.integers(-1, 1000, len(src))  # -1: absent
    index = index_edges(n, src, dst, present=w >= 0)
    whole, _ = longest_path(index, w)
    starts = np.bincount(dst[w >= 0], minlength=n) == 0
    points = np.flatnonzero(starts | (rng.random(n) < 0.2))
    boundary = np.full(n, -1)
    boundary[points] = np.arange(len(points))
    f, t, d = _kernels.boundary_paths(index.order, index.src, w, index.in_ptr, index.in_order, boundary, len(points))
    reduced, _ = longest_path(index_edges(len(points), f, t), d)
    assert np.array_equal(reduced, whole[points])


def test_the_replay_round_reads_the_trace_its_node_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the paths the replay is the last round: it takes the rank's trace round 1 left, reading no file."""
    reads = counted_reads(monkeypatch)
    s = scan([DATA / "gloo_checkpoint_stall"], LocalExecutor(1), critical_paths=False,
             edits=[parse_edit("scale op=allreduce x2")])
    assert s.whatif is not None and len(s.whatif.after_ns) == len(s.steps)
    assert len(reads) >= len(s.ranks) and set(reads.values()) == {1}


@pytest.mark.parametrize(("folder", "missing"), [(DATA / "pipeline_eager_send", 1), (REAL / "param" / "dlrm_8rank_kineto", 3)],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_a_job_missing_a_rank_replays_as_its_graph(folder: Path, missing: int, tmp_path: Path) -> None:
    """With a rank's file gone (``--partial``), the sends and instances it shared are replayed as the graph of
    the ranks given has them."""
    files = sorted(f for f in folder.iterdir() if f.name.endswith((".json", ".json.gz")) and f.name != "manifest.json")
    for i, f in enumerate(files):
        if i != missing:
            (tmp_path / f.name).symlink_to(f.resolve())
    a = analyze(read_trace(tmp_path, partial=True))
    for text in ("scale kind=comm x2", "scale op=sendrecv x3"):
        s = scan([tmp_path], LocalExecutor(2), partial=True, critical_paths=False, edits=[parse_edit(text)])
        assert s.whatif is not None and s.whatif.after_ns == _job_replay(a, text), text
