"""Stalls that many ranks had at once, in the same step.

A detector names the rank whose stall the step's critical path ran through. When every rank
stalled as long in that step (a data loader reading one slow shared filesystem, a pause of every
process), the others' stalls are hidden behind it: each waited inside a collective for the rank the
path names, after stalling itself. Fixing that rank alone then saves nothing, because the next
rank's stall binds (a 150 ms data-loading stall on 16 ranks: 0.04 ms saved by the one rank's fix).

So a stall finding of a step gains the ranks whose step thread (the thread of the step's range)
spent at least half as much more in the same category in that step, measured on their own thread,
on the critical path or off it: the finding names them after its own rank, and ``fix`` cuts each
one's stall (``replay/fix.py``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np

from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import CAT_INDEX, MIN_NS, Finding, ms, rank_ranges
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.points import LANE, PointGraph
from bottleneck_oracle.graph.types import Bottleneck, Category

__all__ = ["JOIN_SHARE", "STALLS", "StallExcess", "join_shared_stalls", "stall_edges", "stall_excess", "thread_excess"]

JOIN_SHARE = 0.5  # of the named rank's excess: how much more another rank's thread must have stalled to join
# the stall findings and the category of time on the step thread each one measures
STALLS = {Bottleneck.DATALOADER_STALL: Category.DATA_LOADING, Bottleneck.HOST_PAUSE: Category.IDLE}


def stall_edges(g: ExecGraph, pg: PointGraph, category: Category) -> tuple[np.ndarray, np.ndarray]:
    """The point-graph edges of every step thread's own time in ``category`` inside its step's range:
    ``(edges, row)``, each edge with the row of ``g.steps`` it belongs to. Only the edges that released
    their next point count: a gap that another dependency ended (a thread blocked on a collective
    without a profiled op around the wait) was a wait for it, not a stall of the thread's own."""
    e = np.flatnonzero((pg.origin == LANE) & (pg.category == CAT_INDEX[category]) & (pg.node[pg.src] >= 0))
    e = e[pg.binding[pg.dst[e]] == e]
    node = pg.node[pg.src[e]]
    row = g.step_row[node]
    e, node, row = e[row >= 0], node[row >= 0], row[row >= 0]
    owner = g.steps.node[row].astype(np.int64)  # the step's range: a ProfilerStep or a steps_from annotation
    o = np.maximum(owner, 0)
    inside = ((owner >= 0) & (g.lane[node] == g.lane[o]) & (pg.t[pg.src[e]] >= g.start_ns[o])
              & (pg.t[pg.dst[e]] <= g.end_ns[o]))
    return e[inside], row[inside]


def thread_excess(g: ExecGraph, pg: PointGraph, reports: list[StepReport], category: Category
                  ) -> dict[tuple[int, int], int]:
    """(step, rank) → how much more time in ``category`` the step's thread spent than the median of
    the rank's other complete steps (ranks with fewer than three complete steps have no median)."""
    edges, row = stall_edges(g, pg, category)
    spent = np.bincount(row, weights=pg.t[pg.dst[edges]] - pg.t[pg.src[edges]], minlength=len(g.steps))
    row_of = g.steps.row_of()
    by_rank: dict[int, list[int]] = defaultdict(list)
    for r in reports:
        by_rank[r.rank].append(r.step)
    out: dict[tuple[int, int], int] = {}
    for rank, steps in by_rank.items():
        if len(steps) < 3:
            continue
        values = spent[[row_of[(s, rank)] for s in steps]]
        for i, s in enumerate(steps):
            out[(s, rank)] = int(values[i] - np.median(np.delete(values, i)))
    return out


StallExcess = dict[Category, dict[tuple[int, int], int]]  # per stall's category: ``thread_excess``


def stall_excess(g: ExecGraph, pg: PointGraph, reports: list[StepReport]) -> StallExcess:
    """``thread_excess`` of every stall's category."""
    return {cat: thread_excess(g, pg, reports, cat) for cat in set(STALLS.values())}


def join_shared_stalls(excess: StallExcess, findings: list[Finding]) -> list[Finding]:
    """``findings``, largest impact first, with each stall finding of a step joined by the ranks that
    stalled with it (see the module; ``excess``: ``stall_excess``); a finding of the same stall on a rank
    it joined is folded into it."""
    joined: set[tuple[Bottleneck, int, int]] = set()  # (category, step, rank) of a finding already out
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: -f.impact_ms):  # the largest of the same stall leads
        if f.category not in STALLS or f.step is None or len(f.ranks) != 1:
            out.append(f)
            continue
        if (f.category, f.step, f.ranks[0]) in joined:
            continue
        mine = excess[STALLS[f.category]]
        head = max(mine.get((f.step, f.ranks[0]), 0), MIN_NS)
        others = sorted(rank for (step, rank), x in mine.items()
                        if step == f.step and rank != f.ranks[0] and x >= JOIN_SHARE * head)
        joined.update((f.category, f.step, rank) for rank in (*f.ranks, *others))
        if others:
            spans = [ms(mine[(f.step, r)]) for r in others]
            f = replace(f, ranks=(*f.ranks, *others), evidence=(
                f"{f.evidence}; rank(s) {rank_ranges(others)} stalled as long on their own step thread "
                f"({min(spans)} to {max(spans)} ms more {STALLS[f.category].value} than their median), "
                f"hidden behind rank {f.ranks[0]}'s: fixed on rank {f.ranks[0]} alone, their stalls bind"))
        out.append(f)
    return out
