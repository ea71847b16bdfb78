"""One call from a trace to everything ``oracle analyze`` reports."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.build import build_graph
from bottleneck_oracle.findings.cause import late_ranks, with_causes
from bottleneck_oracle.analysis.clocks import ClockEstimate, clock_offsets
from bottleneck_oracle.graph.collectives import collective_arrivals
from bottleneck_oracle.graph.critical_path import StepReport, check_replay, find_critical_paths, node_slack
from bottleneck_oracle.findings.findings import Finding, find_bottlenecks
from bottleneck_oracle.graph.gpu_timeline import GpuTimeline, step_gpu_timeline, trace_gpu_timeline
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.path_nodes import GraphNodes
from bottleneck_oracle.graph.points import PointGraph, build_point_graph
from bottleneck_oracle.findings.slow_steps import SlowStep, find_slow_steps, partial_steps, steps_to_explain
from bottleneck_oracle.traces import Trace

__all__ = ["Analysis", "analyze"]


@dataclass(frozen=True, slots=True)
class Analysis:
    """The execution graph of a trace and what it says about every step.

    Args:
        graph (ExecGraph): the DAG.
        points (PointGraph): its weighted point graph (start/end of every node).
        steps (tuple[StepReport, ...]): one per (step, rank).
        slow_steps (tuple[SlowStep, ...]): slowest first.
        partial_steps (frozenset[tuple[int, int]]): (step, rank) cut short by the profiler.
        findings (tuple[Finding, ...]): largest impact first.
        slack_ns (np.ndarray): int64[N] slack of every node.
        gpu (GpuTimeline): what the GPU did in each step, one row per row of ``graph.steps``.
        gpu_trace (GpuTimeline): what the GPU did over the trace, one row per rank with GPU work.
        steps_from (str | None): the regex whose user annotations are the steps (None: ProfilerStep).
        clocks (ClockEstimate | None): what the collectives said about each rank's clock (``analysis/clocks.py``);
            the ranks it moved carry their offset in ``RankInfo.clock_offset_ns``. None: not estimated.
    """

    graph: ExecGraph
    points: PointGraph
    steps: tuple[StepReport, ...]
    slow_steps: tuple[SlowStep, ...]
    partial_steps: frozenset[tuple[int, int]]
    findings: tuple[Finding, ...]
    slack_ns: np.ndarray
    gpu: GpuTimeline
    gpu_trace: GpuTimeline
    steps_from: str | None = None
    clocks: ClockEstimate | None = None

    def cause(self, step: int) -> Finding | None:
        """The cause of ``step`` (``findings/cause.py``): the finding of what delayed it, on the rank that
        did, with the ranks that waited for it; None when the step is not slow."""
        return next((f for f in self.findings if f.cause and f.step == step), None)


def analyze(trace: Trace, steps_from: str | None = None, align_clocks: bool = True) -> Analysis:
    """Builds the graph of ``trace`` and finds every step's critical path, slow steps and bottlenecks.

    Args:
        steps_from (str | None): regex; the user annotations it matches are the steps
            instead of ``ProfilerStep#N`` (see ``build_graph``).
        align_clocks (bool): put ranks whose host clock read ahead on one clock first (``analysis/clocks.py``).
    """
    graph = build_graph(trace, steps_from=steps_from)
    clocks = clock_offsets(graph) if align_clocks else None
    if clocks is not None and clocks.any():  # the graph again, with the collectives' members in step
        del graph  # before the new one is built: a large job has room for one
        trace = trace.with_clocks_moved(clocks.offset_ns)
        graph = build_graph(trace, steps_from=steps_from)
    points = build_point_graph(graph)
    dist, pred = check_replay(points)
    reports = find_critical_paths(graph, points, pred)
    partial = partial_steps(reports)
    complete = [r for r in reports if (r.step, r.rank) not in partial]
    slow = find_slow_steps(reports)
    gpu = step_gpu_timeline(graph)
    slow_numbers = {s.step for s in slow}
    findings = find_bottlenecks(graph, complete, slow_numbers, gpu, points)
    causes = with_causes(GraphNodes(graph), late_ranks(collective_arrivals(graph)), complete, findings,
                         steps_to_explain(complete, slow))
    return Analysis(
        graph=graph, points=points, steps=tuple(reports), slow_steps=tuple(slow),
        partial_steps=frozenset(partial), findings=tuple(causes),
        slack_ns=node_slack(graph, points, dist), gpu=gpu, gpu_trace=trace_gpu_timeline(trace), steps_from=steps_from,
        clocks=clocks,
    )
