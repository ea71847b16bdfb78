"""A job with edits made: the trace's events moved to where the replay of the edited DAG puts
them, and analysed again, so that what the edits expose (the next bottleneck) has findings of
its own. A removed node keeps its place with no duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.longest_path import longest_path
from bottleneck_oracle.replay.engine import weights_with
from bottleneck_oracle.traces import Trace
from bottleneck_oracle.truth.edits import Edit
from bottleneck_oracle.replay.compile import compile_edits

__all__ = ["edited_analysis", "retimed"]


def retimed(a: Analysis, weight: np.ndarray) -> Trace:
    """The trace of ``a`` with every node's event at its time on the replay of the point graph
    weighed by ``weight`` (``replay.engine.weights_with``); events that are no node keep theirs."""
    g, pg = a.graph, a.points
    dist, _ = longest_path(pg.index, weight)
    t = dist + pg.t[-1]  # distances run from the source point, at the trace's first time
    start, end = t[0 : 2 * len(g) : 2], t[1 : 2 * len(g) : 2]
    events = g.trace.events
    start_ns, dur_ns = events.start_ns.copy(), events.dur_ns.copy()
    start_ns[g.event] = start
    dur_ns[g.event] = np.maximum(end - start, 0)
    return replace(g.trace, events=replace(events, start_ns=start_ns, dur_ns=dur_ns))


def edited_analysis(a: Analysis, step: int, edits: Sequence[Edit]) -> Analysis:
    """``a`` with ``edits`` made (compiled for a question about ``step``) and analysed again.

    Raises:
        ConfigError: an edit that does not compile on this trace.
    """
    compiled = compile_edits(a, list(edits), step)
    trace = retimed(a, weights_with(a.points, compiled.speedup, compiled.edge_scale, compiled.cut))
    return analyze(trace, steps_from=a.steps_from, align_clocks=False)  # its clocks are the original's, aligned
