"""The findings of a scan: every detector of ``analyze``, each rank's in its own task, joined as ``analyze`` joins
them, with the cause of each slow step.

Every detector but the stragglers' reads one rank at a time: its steps' critical paths, its graph (the ops of a
step, its GPU work, its Python frames, its threads' stalls). So once the reduce has stitched the paths, each
rank's task builds its graph again and runs them on its own steps (``findings_of_rank``), given the paths with
the nodes of other ranks they run through (``for_rank``). The driver caps and orders what the ranks found, joins
the stalls that many ranks had, and marks each step's cause from the collectives' arrivals (``job_findings``):
the findings of ``analyze`` to the digit.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from bottleneck_oracle.findings.cause import late_ranks, with_causes
from bottleneck_oracle.graph.collectives import CollectiveArrival
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import Finding
from bottleneck_oracle.findings.findings import rank_findings, settled_findings
from bottleneck_oracle.findings.gpu_bound import GpuBound, gpu_bound_steps, gpu_rows
from bottleneck_oracle.graph.gpu_timeline import GpuTimeline, step_gpu_timeline
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.path_nodes import ForeignNodes, GraphNodes
from bottleneck_oracle.graph.points import PointGraph
from bottleneck_oracle.findings.shared_stalls import StallExcess, stall_excess
from bottleneck_oracle.findings.slow_steps import SlowStep, steps_to_explain
from bottleneck_oracle.job.summary import NodeNames, RankSummary

__all__ = ["RankFindings", "RankPathsOf", "findings_of_rank", "for_rank", "job_findings"]


@dataclass(frozen=True, slots=True)
class RankPathsOf:
    """What one rank's findings task is given: its complete steps, on the job's graph and clock, where its nodes
    start (``base``) and its clock sits (``shift``); the other ranks' nodes on their paths (``other``, in order),
    which the task numbers after its own, and what they are (``foreign``); the job's slow steps and the rank's
    pipeline peers. The task puts the steps on its own graph and clock: the driver copies no path."""

    reports: list[StepReport]
    base: int
    shift: int
    other: np.ndarray
    foreign: ForeignNodes
    slow: frozenset[int]
    peers: dict[int, list[int]]

    def local_reports(self, n: int) -> list[StepReport]:
        """The steps on the task's graph of ``n`` nodes and on its clock."""
        return [replace(r, start_ns=r.start_ns - self.shift, end_ns=r.end_ns - self.shift,
                        path_start_ns=r.path_start_ns - self.shift, path_node=_local(r.path_node, self.base, n, self.other))
                for r in self.reports]


@dataclass(frozen=True, slots=True)
class RankFindings:
    """What one rank's task found.

    Args:
        found (list[Finding]): its detectors' findings, before they are capped (``findings.rank_findings``).
        excess (StallExcess): how much more each of its steps' threads stalled than its other steps.
        gpu_steps (frozenset[tuple[int, int]]): its (step, rank) whose GPU recorded work (``gpu_bound.gpu_rows``).
        gpu_bound (list[GpuBound]): its GPU-bound steps (``gpu_bound_steps``).
    """

    found: list[Finding]
    excess: StallExcess
    gpu_steps: frozenset[tuple[int, int]]
    gpu_bound: list[GpuBound]


def findings_of_rank(g: ExecGraph, points: PointGraph, given: RankPathsOf) -> RankFindings:
    """The findings of the graph ``g`` of one rank (its point graph ``points``), built as round 2 built it."""
    reports = given.local_reports(len(g))
    found = rank_findings(g, reports, set(given.slow), GraphNodes(g, given.foreign), given.peers)
    gpu = step_gpu_timeline(g)
    return RankFindings(
        found=found, excess=stall_excess(g, points, reports), gpu_steps=frozenset(gpu_rows(g, gpu)),
        gpu_bound=gpu_bound_steps(g, gpu, [(r.step, r.rank) for r in reports]),
    )


def for_rank(s: RankSummary, base: int, shift: int, mine: list[StepReport], names: NodeNames,
             slow: frozenset[int], peers: dict[int, list[int]]) -> RankPathsOf:
    """The task's input of the rank of ``s`` (``base``: its first node in the job's graph, ``shift``: its clock
    on the job's), from its complete steps ``mine`` on the job's graph (``slow``: the job's slow step numbers)."""
    paths = np.concatenate([r.path_node for r in mine]) if mine else np.zeros(0, np.int64)
    other = np.unique(paths[(paths >= 0) & ((paths < base) | (paths >= base + s.nodes))])
    return RankPathsOf(mine, base, shift, other, names.foreign(other), slow, {s.rank: peers.get(s.rank, [])})


def _local(nodes: np.ndarray, base: int, n: int, other: np.ndarray) -> np.ndarray:
    """``nodes`` of the job's graph as the rank's task numbers them: its own from 0, ``other`` from ``n``."""
    own = (nodes >= base) & (nodes < base + n)
    out = np.where(own, nodes - base, nodes)
    away = (nodes >= 0) & ~own
    out[away] = n + np.searchsorted(other, nodes[away])
    return out


def job_findings(found: dict[int, RankFindings], stragglers: list[Finding], complete: list[StepReport],
                 slow: list[SlowStep], gpu: GpuTimeline, gpu_steps: tuple[tuple[int, int], ...],
                 arrivals: list[CollectiveArrival], names: NodeNames) -> list[Finding]:
    """The job's findings as ``analyze`` gives them, from each rank's (``found``, by rank) and the stragglers'
    (``straggler_findings``, uncapped); ``gpu``: one row per (step, rank) of ``gpu_steps``."""
    rows = {key: i for i, key in enumerate(gpu_steps) if key in found[key[1]].gpu_steps}
    excess: StallExcess = defaultdict(dict)
    for f in found.values():
        for cat, values in f.excess.items():
            excess[cat].update(values)
    raw = stragglers + [x for rank in sorted(found) for x in found[rank].found]
    settled = settled_findings(raw, complete, rows, gpu, excess)
    return with_causes(names, late_ranks(arrivals), complete, settled, steps_to_explain(complete, slow))
