"""Critical paths stitched from each rank's chains: a rank's chains run forward in time and end where its
steps end; the paths jump to the rank that arrived last, and to a gloo send's end on another rank, and
come out as the whole job's graph's, segment by segment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.job.job_paths import JobPaths, PlacedPaths
from bottleneck_oracle.job.summary import JobFrame, RankSummary, match_job, rank_keys, rank_summary
from bottleneck_oracle.traces import read_rank, read_trace, trace_files
from tests.conftest import DATA, REAL

_NONE = np.zeros(0, dtype=np.int64)


def _summaries(folder: Path) -> tuple[list[RankSummary], JobFrame]:
    read = [read_rank(p, named) for p, named in trace_files([folder])]
    traces = sorted((r[3] for r in read if r is not None and r[3] is not None), key=lambda t: t.ranks[0].rank)
    keys = [rank_keys(t) for t in traces]
    frame = JobFrame.of(keys)
    jobs, _ = match_job(keys, frame)
    return [rank_summary(t, job) for t, job in zip(traces, jobs)], frame


def _stitched(summaries: list[RankSummary], frame: JobFrame) -> dict[tuple[int, int], StepReport]:
    base = np.cumsum([0] + [s.nodes for s in summaries]).tolist()
    paths = JobPaths([PlacedPaths(s.rank, b, frame.shift_ns[s.rank], s.paths) for s, b in zip(summaries, base)])
    out = {}
    for s in summaries:
        for row in np.flatnonzero(s.last_node >= 0).tolist():
            shift = frame.shift_ns[s.rank]
            r = StepReport(step=int(s.step[row]), rank=s.rank, start_ns=int(s.start_ns[row]) + shift,
                           end_ns=int(s.end_ns[row]) + shift, breakdown_ns={}, path_node=_NONE,
                           path_category=_NONE, path_rank=_NONE, path_start_ns=_NONE, path_dur_ns=_NONE,
                           start_point=-1, end_point=-1)
            out[(r.step, r.rank)] = paths.report(r, row)
    return out


@pytest.mark.parametrize("folder", [DATA / "pipeline_eager_send", REAL / "param" / "dlrm_8rank_kineto"],
                         ids=["eager_send", "dlrm"])
def test_stitched_paths_are_the_job_graph_s_segment_by_segment(folder: Path) -> None:
    summaries, frame = _summaries(folder)
    stitched = _stitched(summaries, frame)
    a = analyze(read_trace(folder))
    assert len(stitched) == len(a.steps)
    crossed = 0
    for want in a.steps:
        got = stitched[(want.step, want.rank)]
        assert got.breakdown_ns == want.breakdown_ns and sum(got.breakdown_ns.values()) == want.wall_ns
        for field in ("path_node", "path_category", "path_rank", "path_start_ns", "path_dur_ns"):
            assert getattr(got, field).tolist() == getattr(want, field).tolist(), (want.step, want.rank, field)
        crossed += bool((got.path_rank != want.rank).any())
    assert crossed > 0  # some paths run through other ranks


def test_a_rank_s_chains_run_forward_in_time_and_jump_to_members_of_other_ranks() -> None:
    summaries, _ = _summaries(DATA / "pipeline_eager_send")
    kinds = set()
    for s in summaries:
        p = s.paths
        assert p is not None
        edge = np.flatnonzero(p.prev >= 0)
        assert (p.t[p.prev[edge]] <= p.t[edge]).all()
        ends = p.step_end[s.last_node >= 0]
        assert (p.t[ends] == s.end_ns[s.last_node >= 0]).all()
        assert (p.jump_rank != s.rank).all() and (p.prev[p.jump_at] == -1).all()
        kinds |= {("arrival", "send end")[int(x) % 2] for x in p.jump_point.tolist()}
        for other, point in zip(p.jump_rank.tolist(), p.jump_point.tolist()):  # every jump lands on a chain
            target = summaries[other].paths
            assert target is not None and target.entry(point) >= 0
    assert kinds == {"arrival", "send end"}
