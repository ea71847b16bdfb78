"""What the other ranks tell one rank: the member that arrived last at each instance is the job graph's
binding one, and the sends on other ranks to its receives are the job graph's edges across ranks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.graph.build import build_graph, resumes
from bottleneck_oracle.graph.points import build_point_graph
from bottleneck_oracle.job.summary import JobFrame, match_job, rank_keys
from bottleneck_oracle.graph.types import EdgeType
from bottleneck_oracle.traces import read_rank, read_trace, trace_files
from tests.conftest import DATA, REAL, REPO

FOLDERS = {"gloo": REPO / "examples" / "gpt_2rank", "eager_send": DATA / "pipeline_eager_send",
           "dlrm": REAL / "param" / "dlrm_8rank_kineto"}


def _job(folder: Path):  # type: ignore[no-untyped-def]
    """The whole job's graph, each rank's trace alone, and what match_job tells each."""
    read = [read_rank(p, named) for p, named in trace_files([folder])]
    traces = sorted((r[3] for r in read if r is not None and r[3] is not None), key=lambda t: t.ranks[0].rank)
    keys = [rank_keys(t) for t in traces]
    jobs, _ = match_job(keys, JobFrame.of(keys))
    return build_graph(read_trace(folder)), traces, jobs


@pytest.mark.parametrize("name", FOLDERS)
def test_the_last_member_told_is_the_binding_member_of_the_job_s_graph(name: str) -> None:
    g, traces, jobs = _job(FOLDERS[name])
    pg = build_point_graph(g)
    base = np.searchsorted(g.rank, np.arange(g.rank.max() + 1))  # the job's graph numbers ranks in order
    compact = np.cumsum(g.collectives.reliable) - 1
    checked = 0
    for t, job in zip(traces, jobs):
        rank = t.ranks[0].rank
        for node, inst, last_rank, last_node in zip(job.nodes.tolist(), job.instance.tolist(),
                                                    job.last_rank.tolist(), job.last_node.tolist()):
            if not g.collectives.reliable[inst]:
                continue
            binding = pg.binding[2 * len(g) + compact[inst]]
            member = int(pg.src[binding]) // 2
            assert (last_rank, last_node) == (int(g.rank[member]), member - int(base[g.rank[member]])), (rank, node)
            checked += 1
    assert checked > 0


def test_the_sends_told_are_the_job_graph_s_waits_across_ranks() -> None:
    """pipeline_eager_send: gloo sends whose receiving thread resumed on another rank."""
    g, traces, jobs = _job(FOLDERS["eager_send"])
    base = np.searchsorted(g.rank, np.arange(g.rank.max() + 1))
    s, d = g.edges_of(EdgeType.SYNC)
    across = {(int(a), int(b)) for a, b in zip(s.tolist(), d.tolist()) if g.rank[a] != g.rank[b]}
    told = set()
    for t, job in zip(traces, jobs):
        rank = t.ranks[0].rank
        local = build_graph(t, job=job)
        sent = job.sends
        waiter = resumes(local.lane, local.start_ns, local.lane[sent.receive], sent.end_ns)
        # a wait into a member of the send's own matched instance is no edge (the instance orders the two)
        rows = job.rows(sent.instance)
        own = (waiter >= 0) & (local.collective[np.maximum(waiter, 0)] == rows) & local.collectives.reliable[rows]
        told |= {(int(base[r] + n), int(base[rank] + w)) for r, n, w, o in zip(
            sent.rank.tolist(), sent.node.tolist(), waiter.tolist(), own.tolist()) if w >= 0 and not o}
        assert set(job.sent.tolist()) >= {n for r, n in zip(sent.rank.tolist(), sent.node.tolist()) if r == rank}
    assert across and told == across
    senders = {int(g.rank[a]) for a, _ in across}
    for t, job in zip(traces, jobs):  # every rank that sent across is told which of its sends went out
        if t.ranks[0].rank in senders:
            assert len(job.sent) > 0


def test_a_rank_s_rows_and_per_row_values_follow_its_instances() -> None:
    _, traces, jobs = _job(FOLDERS["gloo"])
    job = jobs[0]
    rows = job.rows(job.instance)
    assert rows.min() == 0 and rows.max() == len(job.table) - 1
    assert job.per_row(job.last_start).tolist() == [int(job.last_start[rows == r][0]) for r in range(len(job.table))]
    match, done, arrived = job.match(build_graph(traces[0], job=job).end_ns)
    assert match.instance[job.nodes].tolist() == rows.tolist()
    reliable = job.table.reliable[rows]
    assert done[job.nodes[reliable]].tolist() == job.first_end[reliable].tolist()
    assert arrived[job.nodes[reliable]].tolist() == job.last_start[reliable].tolist()
