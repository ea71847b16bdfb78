"""A scan's findings round: each rank's task reads every node of its steps' paths, its own and the other ranks'
it is told of, as the job's graph says them; and a synthetic pipeline's bubbles and pause come out of the
scan as out of ``analyze``, with the cause of the slow step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.job import scan_rounds
from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.path_nodes import GraphNodes, checkpoint_ranges, p2p_nodes
from bottleneck_oracle.job.scan import scan
from bottleneck_oracle.job.scan_findings import findings_of_rank
from bottleneck_oracle.graph.types import Bottleneck
from bottleneck_oracle.executor import LocalExecutor
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA
from tests.job.test_scan import _job


@pytest.mark.parametrize("folder", [DATA / "pipeline_eager_send", DATA / "gloo_checkpoint_stall", "paused_pipeline"],
                         ids=str)
def test_a_rank_s_task_reads_each_node_of_its_paths_as_the_job_s_graph(folder: Path | str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _job(folder) if isinstance(folder, str) else folder
    seen: dict[tuple[int, int], tuple[list[object], ...]] = {}
    foreign = [0]

    def spy(g, points, given):  # type: ignore[no-untyped-def]
        nodes = GraphNodes(g, given.foreign)
        for r in given.local_reports(len(g)):
            n = r.path_node[r.path_node >= 0]
            foreign[0] += int((n >= len(g)).sum())
            seen[(r.step, r.rank)] = ([nodes.node_name(x) for x in n.tolist()], nodes.kinds(n).tolist(),
                                      nodes.p2p(n).tolist(), nodes.roles(n).tolist(), nodes.in_checkpoint(n).tolist())
        return findings_of_rank(g, points, given)

    monkeypatch.setattr(scan_rounds, "findings_of_rank", spy)
    s = scan([folder], LocalExecutor(1))  # one worker: the tasks run here, through the spy
    a = analyze(read_trace(folder))
    g = a.graph
    want = {}
    for r in a.steps:
        if (r.step, r.rank) in a.partial_steps:
            continue
        n = r.path_node[r.path_node >= 0]
        want[(r.step, r.rank)] = ([g.node_name(x) for x in n.tolist()], g.kind[n].tolist(), p2p_nodes(g)[n].tolist(),
                                  g.role[n].tolist(), checkpoint_ranges(g)[n].tolist())
    assert seen == want
    assert foreign[0] > 0  # the paths run through other ranks' nodes, and the tasks were told of them
    assert list(s.findings) == list(a.findings)


def test_a_pipeline_s_bubbles_and_pause_are_analyze_s_with_the_cause() -> None:
    folder = _job("paused_pipeline")
    s = scan([folder], LocalExecutor(2))
    kinds = {f.category for f in s.findings}
    assert Bottleneck.PIPELINE_BUBBLE in kinds and Bottleneck.HOST_PAUSE in kinds
    (cause,) = [f for f in s.findings if f.cause and f.step == 3]
    assert cause.category == Bottleneck.HOST_PAUSE and cause.ranks[0] == 5 and cause.waiting
    assert list(s.findings) == list(analyze(read_trace(folder)).findings)
    assert np.all(np.array(s.task_peak_bytes) > 0)
