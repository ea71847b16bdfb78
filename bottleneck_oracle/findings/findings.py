"""All bottleneck detectors together: every finding of a trace, bounded by what its step lost
(``findings/severity.py``): the major ones first, each group largest impact first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.detectors import category_findings, checkpoints, host_pauses, slow_compute, stragglers
from bottleneck_oracle.findings.finding import CAT_INDEX, MAJOR, Finding, own_ns
from bottleneck_oracle.findings.gpu_bound import agree_with_gpu, gpu_rows
from bottleneck_oracle.findings.gpu_detectors import host_bound, host_syncs, pipeline_bubbles
from bottleneck_oracle.graph.gpu_timeline import GpuTimeline
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.path_nodes import GraphNodes, PathNodes, p2p_peers
from bottleneck_oracle.graph.points import PointGraph
from bottleneck_oracle.findings.severity import bound_findings
from bottleneck_oracle.findings.shared_stalls import STALLS, StallExcess, join_shared_stalls, stall_excess
from bottleneck_oracle.graph.types import Bottleneck, Category

__all__ = ["Finding", "find_bottlenecks", "rank_findings", "settled_findings", "strongest"]

_KIND_ORDER = {b: i for i, b in enumerate(Bottleneck)}


def find_bottlenecks(g: ExecGraph, reports: list[StepReport], slow_steps: set[int],
                     gpu: GpuTimeline | None = None, points: PointGraph | None = None) -> list[Finding]:
    """Every finding of every detector, impacts capped by their step's excess and, on the host side,
    by the GPU's idle time (``findings/gpu_bound.py``): major findings first, largest impact first, then
    the minor ones (anomalies of steps that are not slow).

    Args:
        reports: the complete steps (partial ones left out).
        slow_steps: step numbers slow on some rank; step anomalies are looked for only there.
        gpu: the GPU timeline of every row of ``g.steps``; None leaves host-side findings uncapped.
        points: the point graph of ``g``, to find the ranks that had a step's stall too
            (``findings/shared_stalls.py``); None leaves each stall on the rank its path names.
    """
    found = stragglers(g, reports, slow_steps) + rank_findings(g, reports, slow_steps, GraphNodes(g),
                                                              p2p_peers(g.collective, g.rank, g.collectives))
    stalls = points is not None and any(f.category in STALLS and f.step is not None for f in found)
    return settled_findings(found, reports, gpu_rows(g, gpu) if gpu is not None else None, gpu,
                            stall_excess(g, points, reports) if stalls and points is not None else None)


def rank_findings(g: ExecGraph, reports: list[StepReport], slow_steps: set[int], path_nodes: PathNodes,
                  peers: dict[int, list[int]]) -> list[Finding]:
    """The findings of every detector but the stragglers' (which read every rank's arrivals), before they
    are capped: each reads one rank at a time, so a scan runs them in each rank's task on its graph alone
    (``path_nodes``: the nodes of the paths, which run through other ranks; ``peers``: the job's
    ``p2p_peers``)."""
    own = lambda cat: (lambda r: own_ns(r, cat))  # noqa: E731
    mask = lambda cat: (lambda r: (r.path_category == CAT_INDEX[cat]) & (r.path_rank == r.rank))  # noqa: E731
    slow = slow_steps
    # pipeline send/recv waits are bubbles, not exposed collectives
    collective_mask = lambda r: mask(Category.COMMUNICATION)(r) & ~(path_nodes.p2p(np.maximum(r.path_node, 0))  # noqa: E731
                                                                     & (r.path_node >= 0))
    collective_time = lambda r: int(r.path_dur_ns[collective_mask(r)].sum())  # noqa: E731
    # on a GPU rank the GPU waits while the critical path runs on the host: CPU ops and launches
    gpu_ranks = set(g.trace.lanes.rank[g.trace.lanes.is_gpu].tolist())
    host_mask = lambda r: (mask(Category.LAUNCH_OVERHEAD)(r)  # noqa: E731
                           | (mask(Category.CPU)(r) if r.rank in gpu_ranks else False))
    host_time = lambda r: int(r.path_dur_ns[host_mask(r)].sum())  # noqa: E731
    return (
        host_pauses(g, reports, slow, path_nodes) + checkpoints(reports, path_nodes)
        + host_bound(g, reports, path_nodes) + host_syncs(g, reports, slow) + pipeline_bubbles(g, reports, slow, path_nodes, peers)
        + slow_compute(g, reports, slow)
        + category_findings(path_nodes, reports, slow, Bottleneck.DATALOADER_STALL, own(Category.DATA_LOADING),
                            mask(Category.DATA_LOADING), "data loading", 0.15)
        + category_findings(path_nodes, reports, slow, Bottleneck.EXPOSED_COMMUNICATION, collective_time,
                            collective_mask, "communication not hidden by compute", 0.25)
        + category_findings(path_nodes, reports, slow, Bottleneck.HOST_SYNC, own(Category.SYNC_WAIT),
                            mask(Category.SYNC_WAIT), "blocking synchronisation", 0.15)
        + category_findings(path_nodes, reports, slow, Bottleneck.LAUNCH_OVERHEAD, host_time, host_mask,
                            "host time issuing GPU work", 0.30)
    )


def settled_findings(found: list[Finding], reports: list[StepReport], gpu_rows: dict[tuple[int, int], int] | None,
                     gpu: GpuTimeline | None, excess: StallExcess | None) -> list[Finding]:
    """``found`` (every detector's, in any order) capped and ordered as ``find_bottlenecks`` gives them.

    Args:
        gpu_rows: (step, rank) → row of ``gpu`` of the ranks that recorded GPU work (``gpu_bound.gpu_rows``);
            None: host-side findings uncapped.
        excess: per stall, how much more each (step, rank)'s thread stalled than its other steps
            (``shared_stalls.stall_excess``); None: each stall stays on the rank its path names.
    """
    bounded = bound_findings(found, reports)
    if gpu_rows is not None and gpu is not None:
        bounded = agree_with_gpu(gpu_rows, gpu, bounded)
    best = strongest(bounded)
    # what made a rank late explains the slow steps of the ranks that waited for it
    late = {(f.step, f.ranks) for f in best if f.category == Bottleneck.STRAGGLER_RANK and f.severity == MAJOR}
    kept = [replace(f, severity=MAJOR) if (f.step, f.ranks) in late else f for f in best]
    if excess is not None:
        kept = join_shared_stalls(excess, kept)
    return sorted(kept, key=_rank_key(kept))


def strongest(findings: list[Finding]) -> list[Finding]:
    """One finding per kind, step and ranks: the one of largest impact (the first found on a tie)."""
    best: dict[tuple[Bottleneck, int | None, tuple[int, ...]], Finding] = {}
    for f in sorted(findings, key=lambda f: -f.impact_ms):
        best.setdefault((f.category, f.step, f.ranks), f)
    return sorted(best.values(), key=_order)


def _order(f: Finding) -> tuple[float, int, int, tuple[int, ...]]:
    """Largest impact first, then by kind, step and ranks: one order whichever rank's detectors ran first."""
    return -f.impact_ms, _KIND_ORDER[f.category], -1 if f.step is None else f.step, f.ranks


def _rank_key(findings: list[Finding]) -> Callable[[Finding], tuple[bool, float, int, tuple[float, int, int, tuple[int, ...]]]]:
    """Major before minor, largest impact first, but a late rank comes right after what made it
    late (its own finding)."""
    cause: dict[tuple[int | None, tuple[int, ...]], float] = {}
    for f in findings:
        if f.category != Bottleneck.STRAGGLER_RANK:
            where = (f.step, f.ranks)
            cause[where] = max(cause.get(where, 0.0), f.impact_ms)

    def key(f: Finding) -> tuple[bool, float, int, tuple[float, int, int, tuple[int, ...]]]:
        explained = f.category == Bottleneck.STRAGGLER_RANK and (f.step, f.ranks) in cause
        return (f.severity != MAJOR, -(cause[(f.step, f.ranks)] if explained else f.impact_ms), int(explained),
                _order(f))
    return key
