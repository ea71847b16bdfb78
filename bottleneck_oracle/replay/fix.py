"""``fix CATEGORY``: what a step's finding of that category attributes, taken out of the DAG.

Each category names the part of the step's critical path its detector measures (the same
masks as ``findings/findings.py``): a data-loading stall is the path's data-loading time on its rank,
a host pause its idle time, launch overhead the host time issuing GPU work, exposed
communication the collectives (not the pipeline's sends), slow compute the compute, a pipeline
bubble (chronic) the sends it waited on, a straggler the late rank's work as
the rank that waited longest for it saw it. The finding's impact (at most its step's excess; a chronic
finding's, all of it, and a chronic straggler's, what it was late by in each step) is cut from those
segments, longest first, down to a common level, so one long stall goes before a share of everything;
the replay then decides what the step gains. Blocking syncs and a checkpoint save are removed instead:
the calls, what they ran and launched, and their waits. Slow compute and a bubble in one step are brought
back to normal: each compute op to its name's median in the rank's other steps, each send/recv to the same
transfer's median.
"""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.graph import _kernels
from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.detectors import compute_time, late_arrivals, late_ns
from bottleneck_oracle.graph.collectives import collective_arrivals
from bottleneck_oracle.findings.finding import Finding, rank_ranges
from bottleneck_oracle.replay.node_edits import removal
from bottleneck_oracle.graph.path_nodes import p2p_nodes
from bottleneck_oracle.findings.shared_stalls import STALLS, stall_edges, thread_excess
from bottleneck_oracle.graph.types import CATEGORIES, Category, NodeKind, Role
from bottleneck_oracle.replay.engine import own_time
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import Edit
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["apply_fix", "water_level"]

_C = {c: np.int8(i) for i, c in enumerate(CATEGORIES)}
_REMOVED = (Bottleneck.HOST_SYNC, Bottleneck.CHECKPOINT_STALL)
_WHAT = {
    Bottleneck.DATALOADER_STALL: "data-loading time", Bottleneck.HOST_PAUSE: "idle host time",
    Bottleneck.LAUNCH_OVERHEAD: "host time issuing GPU work", Bottleneck.EXPOSED_COMMUNICATION:
    "collective time", Bottleneck.SLOW_COMPUTE: "compute time", Bottleneck.PIPELINE_BUBBLE:
    "send/recv waits", Bottleneck.STRAGGLER_RANK: "the late rank's work before it arrived",
}


def apply_fix(a: Analysis, edit: Edit, step: int, edge_scale: np.ndarray, speedup: np.ndarray,
              cut: np.ndarray) -> tuple[int, str]:
    """Applies ``edit`` (a FIX) for a question about ``step``: edits ``edge_scale``, ``speedup`` and
    ``cut`` in place; returns how many nodes or edges it touched and what it assumed.

    Raises:
        ConfigError: the step has no finding of the category.
    """
    found = _findings(a, edit, step)
    if edit.category in _REMOVED:
        seed = np.zeros(len(a.graph), dtype=bool)
        for f in found:
            seed |= _checkpoints(a, f) if edit.category == Bottleneck.CHECKPOINT_STALL else _syncs(a, f)
        nodes, waits, callers = removal(a.graph, a.points, seed)
        speedup[nodes] = np.inf
        cut |= waits
        edge_scale[callers] = 0.0
        what = "checkpoint save" if edit.category == Bottleneck.CHECKPOINT_STALL else "blocking syncs"
        return int(nodes.sum()), (f"{edit}: the {what} gone with what they ran and launched ({int(nodes.sum())} "
                                  f"nodes) and the {int(waits.sum())} waits on the GPU they made")
    if edit.category == Bottleneck.SLOW_COMPUTE:
        hit = sum(_back_to_normal(a, f, speedup) for f in found)
        return hit, (f"{edit}: {hit} compute ops back to the speed of the same ops in the rank's other steps "
                     "(per op name, the median of their step totals)")
    p2p = p2p_nodes(a.graph)
    if edit.category == Bottleneck.PIPELINE_BUBBLE and all(f.step is not None for f in found):
        hit = sum(_sends_back_to_normal(a, f, p2p, speedup) for f in found)
        return hit, (f"{edit}: {hit} send/recv transfers back to the time of the same transfer in the rank's "
                     "other steps (the k-th of the step, median)")
    hit, removed_ms = 0, 0.0
    # a chronic straggler's cut is its lateness in each step: the collectives' arrivals, read only then
    lateness = _lateness(a) if any(f.step is None and f.category == Bottleneck.STRAGGLER_RANK for f in found) else {}
    for f in found:
        for report, ranks in _reports(a, f):
            edges = _kernels.walk_back(a.points.binding, a.points.src, a.points.t, report.end_point, report.start_ns)
            mine = edges[_path_mask(a, edges, edit.category, ranks, p2p)]
            # a chronic finding's time is what the category takes in every step: all of it goes; a chronic
            # straggler's is, in each step, how late it was there (on time, it would have worked as long less)
            amount_ns = f.impact_ms * 1e6 if f.step is not None else (
                lateness.get((report.step, report.rank), 0) if f.category == Bottleneck.STRAGGLER_RANK else None)
            cut, amount = _cut(a, mine, amount_ns, edge_scale, speedup)
            hit, removed_ms = hit + cut, removed_ms + amount / 1e6
        for edges, excess_ns in _stalled_with(a, f):
            cut, amount = _cut(a, edges, excess_ns, edge_scale, speedup)
            hit, removed_ms = hit + cut, removed_ms + amount / 1e6
    chronic = "" if all(f.step is not None for f in found) else (
        " (a chronic finding: in each step, what it was late by there)" if edit.category == Bottleneck.STRAGGLER_RANK
        else " (a chronic finding: all of it, in every step; an upper bound)")
    shared = sorted({r for f in found if f.category in STALLS and f.step is not None for r in f.ranks[1:]})
    threads = f", and off the step threads of rank(s) {rank_ranges(shared)}, which stalled with it," if shared else ""
    return hit, (f"{edit}: {removed_ms:.3f} ms of {_WHAT[edit.category]} taken off the critical path where the "
                 f"finding puts it{threads} (its longest segments first){chronic}, the rest of the step replayed "
                 "as recorded")


def _cut(a: Analysis, edges: np.ndarray, amount_ns: float | None, edge_scale: np.ndarray,
         speedup: np.ndarray) -> tuple[int, float]:
    """Cuts ``amount_ns`` (None: all) off ``edges``, longest first down to a common level; returns how
    many edges it shortened and the ns it cut."""
    weight = a.points.weight[edges].clip(min=0) * edge_scale[edges]
    total = float(weight.sum())
    amount = total if amount_ns is None else min(amount_ns, total)
    if amount <= 0:
        return 0, 0.0
    level = water_level(weight, amount)
    over = weight > level
    with np.errstate(divide="ignore"):  # a level of 0 removes them: an infinite speed-up
        _shorten(a, edges[over], weight[over] / level, edge_scale, speedup)
    return int(over.sum()), amount


def _lateness(a: Analysis) -> dict[tuple[int, int], int]:
    """(step, rank) -> how long the other ranks waited for the rank in the step, where it was late by its own
    doing (as the straggler detector counts it)."""
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps]
    return {key: late_ns(hits) for key, hits in late_arrivals(collective_arrivals(a.graph), complete).items()}


def _stalled_with(a: Analysis, f: Finding) -> list[tuple[np.ndarray, int]]:
    """Per rank that stalled with the finding's own (``findings/shared_stalls.py``): its step thread's edges
    of the stall's category in the step, and how much more than its median they took."""
    if f.category not in STALLS or f.step is None or len(f.ranks) < 2:
        return []
    g, category = a.graph, STALLS[f.category]
    edges, row = stall_edges(g, a.points, category)
    excess = thread_excess(g, a.points, [r for r in a.steps if (r.step, r.rank) not in a.partial_steps], category)
    row_of = g.steps.row_of()
    return [(edges[row == row_of[(f.step, rank)]], excess.get((f.step, rank), 0)) for rank in f.ranks[1:]]


def _shorten(a: Analysis, edges: np.ndarray, factor: np.ndarray, edge_scale: np.ndarray,
             speedup: np.ndarray) -> None:
    """Makes each edge ``factor`` times shorter: a node's own time through the node (all its segments,
    since a transfer also weighs the lane edges of its members), a gap through the edge itself."""
    pg, g = a.points, a.graph
    owner = pg.owner[edges]
    kind = g.kind[np.maximum(owner, 0)]
    # a gap with only a range open (a ProfilerStep, a record_function) is no node's work: the edge itself
    work = (owner >= 0) & ~np.isin(kind, (NodeKind.ANNOTATION, NodeKind.PYTHON))
    own = work & own_time(a.points)[edges]
    nodes, factors = owner[own], factor[own]
    instance = g.collective[nodes]
    if (instance >= 0).any():  # a transfer is every member's: shorten them all
        by_instance = np.ones(len(g.collectives))
        np.maximum.at(by_instance, instance[instance >= 0], factors[instance >= 0])
        members = np.flatnonzero(g.collective >= 0)
        nodes = np.concatenate([nodes, members])
        factors = np.concatenate([factors, by_instance[g.collective[members]]])
    np.maximum.at(speedup, nodes, factors)  # several segments of one node: the largest cut
    edge_scale[edges[~own]] /= factor[~own]


def water_level(weight: np.ndarray, amount: float) -> float:
    """The level L with sum(max(weight - L, 0)) = amount: the largest segments are cut first, down to
    a common level, so a fix takes out the outlier (one long stall) rather than a share of everything."""
    w = np.sort(weight)[::-1]
    above = np.cumsum(w) - w * np.arange(1, len(w) + 1)  # what cutting everything down to w[i] removes
    i = int(np.searchsorted(above, amount))  # the first level that removes enough
    top = float(w[:i].sum())  # the i largest are cut to a level between w[i] and w[i-1]
    # clamped: (top - amount) / i rounds a ulp above the largest when equal weights lose almost nothing
    return min(max((top - amount) / i, 0.0), float(w[0])) if i else float(w[0])


def _findings(a: Analysis, edit: Edit, step: int) -> list[Finding]:
    steps = edit.select.steps or (step,)
    found = [f for f in a.findings if f.category == edit.category and (f.step is None or f.step in steps)
             and (not edit.select.ranks or set(f.ranks) & set(edit.select.ranks))]
    if not found:
        where = ", ".join(map(str, steps))
        seen = sorted({str(f.category) for f in a.findings if f.step is None or f.step in steps})
        raise ConfigError(f"edit {edit}: step {where} has no {edit.category} finding to fix "
                          f"(its findings: {', '.join(seen) or 'none'})")
    return found


def _path_mask(a: Analysis, edges: np.ndarray, category: str, ranks: tuple[int, ...], p2p: np.ndarray) -> np.ndarray:
    """bool[len(edges)]: the path segments a finding of ``category`` on ``ranks`` measures."""
    pg = a.points
    cat, owner = pg.category[edges], pg.owner[edges]
    own = np.isin(pg.rank[edges], ranks)
    sends = (owner >= 0) & p2p[np.maximum(owner, 0)]
    if category == Bottleneck.DATALOADER_STALL:
        return own & (cat == _C[Category.DATA_LOADING])
    if category == Bottleneck.HOST_PAUSE:
        return own & (cat == _C[Category.IDLE])
    if category == Bottleneck.LAUNCH_OVERHEAD:
        return own & np.isin(cat, (_C[Category.LAUNCH_OVERHEAD], _C[Category.CPU]))
    if category == Bottleneck.EXPOSED_COMMUNICATION:
        return own & (cat == _C[Category.COMMUNICATION]) & ~sends
    if category == Bottleneck.SLOW_COMPUTE:
        return own & np.isin(cat, (_C[Category.GPU_COMPUTE], _C[Category.CPU]))
    if category == Bottleneck.PIPELINE_BUBBLE:  # chronic: the waits on send/recv
        return sends
    return own & (cat != _C[Category.COMMUNICATION])  # a straggler: the late rank's work


def _reports(a: Analysis, f: Finding) -> list[tuple[StepReport, tuple[int, ...]]]:
    """The step reports a finding's time is on, each with the ranks whose segments it is."""
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps]
    if f.category == Bottleneck.STRAGGLER_RANK and f.waiting:
        waited = [r for r in complete if r.step == f.step and r.rank in f.waiting]
        return [(max(waited, key=lambda r: r.wall_ns), f.ranks)] if waited else []
    ranks = f.ranks[:1] if f.category in STALLS and f.step is not None else f.ranks  # the others: _stalled_with
    return [(r, (r.rank,)) for r in complete if r.rank in ranks and (f.step is None or r.step == f.step)]


def _back_to_normal(a: Analysis, f: Finding, speedup: np.ndarray) -> int:
    """Speeds each compute op of the finding's steps up to its name's median step total in the rank's
    other steps (as ``findings.detectors.slow_compute`` compares them); returns the ops it touched."""
    g = a.graph
    compute, is_compute = compute_time(g)
    hit = 0
    for rank in f.ranks:
        rows = np.flatnonzero((g.steps.rank == rank) & (g.steps.step >= 0))
        totals = {}
        for row in rows.tolist():
            nodes = np.flatnonzero((g.step_row == row) & is_compute)
            names, inverse = np.unique(g.name[nodes], return_inverse=True)
            totals[row] = (nodes, inverse, names, np.bincount(inverse, weights=compute[nodes]))
        for row in rows.tolist():
            if f.step is not None and g.steps.step[row] != f.step:
                continue
            nodes, inverse, names, total = totals[row]
            others = [dict(zip(totals[r][2].tolist(), totals[r][3].tolist())) for r in rows.tolist() if r != row]
            normal = np.array([np.median([o.get(n, 0.0) for o in others]) if others else t
                               for n, t in zip(names.tolist(), total.tolist())])
            ratio = np.where(normal > 0, total / np.maximum(normal, 1.0), 1.0)
            slower = ratio[inverse] > 1.0
            speedup[nodes[slower]] *= ratio[inverse][slower]
            hit += int(slower.sum())
    return hit


def _sends_back_to_normal(a: Analysis, f: Finding, p2p: np.ndarray, speedup: np.ndarray) -> int:
    """Speeds the k-th send/recv of the finding's ranks and step (and its peer) up to the median of the
    k-th send/recv of the rank's other steps; returns the transfers it touched."""
    g = a.graph
    hit = 0
    for rank in f.ranks:
        mine = p2p & (g.rank == rank)
        by_step = {int(s): np.flatnonzero(mine & (g.step == s)) for s in np.unique(g.step[mine]) if s >= 0}
        if f.step not in by_step:
            continue
        nodes = by_step[f.step]
        others = [v for s, v in by_step.items() if s != f.step and len(v) == len(nodes)]
        if not others:
            continue
        normal = np.median(np.stack([g.dur_ns[v] for v in others]), axis=0)
        ratio = g.dur_ns[nodes] / np.maximum(normal, 1.0)
        slower = ratio > 1.0
        for node, factor in zip(nodes[slower].tolist(), ratio[slower].tolist()):
            members = np.flatnonzero(g.collective == g.collective[node]) if g.collective[node] >= 0 else [node]
            speedup[members] = np.maximum(speedup[members], factor)
        hit += int(slower.sum())
    return hit


def _in_step(a: Analysis, f: Finding) -> np.ndarray:
    g = a.graph
    mask = np.isin(g.rank, f.ranks)
    return mask & (g.step == f.step) if f.step is not None else mask


def _checkpoints(a: Analysis, f: Finding) -> np.ndarray:
    return (a.graph.role == Role.CHECKPOINT) & _in_step(a, f)


def _syncs(a: Analysis, f: Finding) -> np.ndarray:
    """The blocking sync calls of the finding's ranks and step, each with the CPU op that made it
    (``aten::item`` around ``cudaStreamSynchronize``): the ops a remedy takes out of the step."""
    g = a.graph
    seed = (g.role == Role.SYNC) & _in_step(a, f)
    node = np.flatnonzero(seed)
    while len(node):  # climb to the outermost CPU op around each sync
        parent = g.parent[node]
        up = (parent >= 0) & (g.kind[np.maximum(parent, 0)] == NodeKind.CPU_OP)
        seed[parent[up]] = True
        node = parent[up]
    return seed
