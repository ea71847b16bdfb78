"""Ranks summarised alone: the job's instances numbered as the job's graph numbers them, each rank's members
with the ends its collectives gave them (a gloo op ended where its waiter resumed, from the other ranks'
times), and each rank's times put on the job's clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.graph.build import build_graph
from bottleneck_oracle.job.summary import JobFrame, match_job, rank_keys, rank_summary
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_rank, read_trace, trace_files
from tests.conftest import DATA, REAL, REPO


def _ranks(folder: Path) -> list:  # type: ignore[type-arg]
    read = [read_rank(p, named) for p, named in trace_files([folder])]
    return sorted((r[3] for r in read if r is not None and r[3] is not None), key=lambda t: t.ranks[0].rank)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GPU kernels: all-reduces, and point-to-point transfers between pipeline stages."""
    out = tmp_path_factory.mktemp("pipeline")
    synthesize(out, SynthConfig(model="tiny", dp=2, tp=2, pp=2, microbatches=2, steps=3), workers=1)
    return out


@pytest.mark.parametrize("name", ["gloo", "gloo_late_spans", "dlrm", "pipeline"])
def test_the_job_s_instances_are_numbered_and_judged_as_the_job_s_graph_does(name: str, pipeline: Path) -> None:
    folder = {"gloo": REPO / "examples" / "gpt_2rank", "gloo_late_spans": DATA / "gloo_slow_rank_late_spans",
              "dlrm": REAL / "param" / "dlrm_8rank_kineto", "pipeline": pipeline}[name]
    g = build_graph(read_trace(folder))
    traces = _ranks(folder)
    keys = [rank_keys(t) for t in traces]
    jobs, table = match_job(keys, JobFrame.of(keys))
    assert table.kind == g.collectives.kind and table.key == g.collectives.key
    assert table.members.tolist() == g.collectives.members.tolist()
    assert table.reliable.tolist() == g.collectives.reliable.tolist() and len(table) > 0
    base = 0
    for t, job in zip(traces, jobs):
        n = int((g.rank == t.ranks[0].rank).sum())
        mine = g.collective[base : base + n]
        assert sorted(zip(job.nodes.tolist(), job.instance.tolist())) == \
            [(int(i), int(c)) for i in np.flatnonzero(mine >= 0) for c in [mine[i]]]
        base += n


def test_a_rank_alone_has_the_job_s_member_ends_even_where_the_others_moved_them() -> None:
    """A gloo op ends where its waiting thread resumed, which the instance's first member to finish decides:
    read from the other ranks, the rank alone gets the same ends as the whole job's graph."""
    folder = DATA / "gloo_slow_rank_late_spans"
    g = build_graph(read_trace(folder))
    traces = _ranks(folder)
    keys = [rank_keys(t) for t in traces]
    jobs, _ = match_job(keys, JobFrame.of(keys))
    frame = JobFrame.of(keys)
    moved = 0
    for t, k, job in zip(traces, keys, jobs):
        rank = t.ranks[0].rank
        s = rank_summary(t, job)
        members = np.flatnonzero((g.rank == rank) & (g.collective >= 0))
        assert (s.member_end + frame.shift_ns[rank]).tolist() == g.end_ns[members].tolist()
        assert (s.member_start + frame.shift_ns[rank]).tolist() == g.start_ns[members].tolist()
        raw = dict(zip(np.concatenate([c.nodes for c in k.comm]).tolist(), np.concatenate(k.end).tolist()))
        moved += sum(int(e) < raw[int(m)] for m, e in zip(s.member.tolist(), s.member_end.tolist()))
    assert moved > 0, "no gloo op was ended early: the case does not show what it tests"


def test_the_job_frame_puts_each_rank_s_times_where_the_job_s_trace_has_them() -> None:
    folder = REAL / "param" / "dlrm_8rank_kineto"
    whole = read_trace(folder)
    traces = _ranks(folder)
    frame = JobFrame.of([rank_keys(t) for t in traces])
    for t in traces:
        rank = t.ranks[0].rank
        assert (t.events.start_ns + frame.shift_ns[rank]).tolist() == whole.events.start_ns[whole.events.rank == rank].tolist()
