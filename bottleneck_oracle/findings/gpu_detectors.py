"""Detectors of GPU ranks: host-bound (launch overhead) steps, host syncs, pipeline bubbles."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import CAT_INDEX, MIN_NS, Finding, ms, own_ns, top_ops
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.grouping import positions_by
from bottleneck_oracle.graph.intervals import covered, merged
from bottleneck_oracle.graph.path_nodes import PathNodes, p2p_nodes
from bottleneck_oracle.graph.types import Bottleneck, Category, NodeKind, Role

__all__ = ["gpu_busy_ns", "host_bound", "host_syncs", "pipeline_bubbles"]


def gpu_busy_ns(g: ExecGraph) -> np.ndarray:
    """int64[steps]: time some GPU stream of each step's rank computed or copied inside the step's
    window (communication kernels spin while they wait, so they do not count)."""
    steps = g.steps
    busy = np.zeros(len(steps), dtype=np.int64)
    compute = np.flatnonzero(g.trace.lanes.is_gpu[g.lane] & (g.parent < 0) & (g.kind != NodeKind.COMM))
    compute_of = positions_by(g.rank[compute])
    for rank, rows in positions_by(steps.rank).items():
        mine = compute[compute_of.get(rank, [])]
        s, e = merged(g.start_ns[mine], g.start_ns[mine] + g.dur_ns[mine])
        busy[rows] = covered(s, e, steps.start_ns[rows], steps.end_ns[rows])
    return busy


def host_bound(g: ExecGraph, reports: list[StepReport], path_nodes: PathNodes) -> list[Finding]:
    """GPU ranks whose GPU mostly waits while the critical path runs on the host (launch-bound; ``path_nodes``:
    those of the paths)."""
    lanes = g.trace.lanes
    out = []
    row_of = g.steps.row_of()
    busy_ns = gpu_busy_ns(g)
    by_rank: dict[int, list[tuple[StepReport, float, float]]] = defaultdict(list)
    for r in reports:
        if not (lanes.is_gpu & (lanes.rank == r.rank)).any() or r.wall_ns < MIN_NS:
            continue
        host = own_ns(r, Category.CPU) + own_ns(r, Category.LAUNCH_OVERHEAD)
        by_rank[r.rank].append((r, busy_ns[row_of[(r.step, r.rank)]] / r.wall_ns, host / r.wall_ns))
    for rank, rows in by_rank.items():
        hits = [x for x in rows if x[1] < 0.5 and x[2] >= 0.5]
        if not hits or len(hits) * 2 < len(rows):
            continue
        hit_rows = [row_of[(x[0].step, rank)] for x in hits]
        kernels = g.dur_ns[(g.kind == NodeKind.KERNEL) & np.isin(g.step_row, hit_rows)]
        launches = g.dur_ns[(g.rank == rank) & (g.role == Role.LAUNCH)]
        worst = max(hits, key=lambda x: x[2])[0]
        busy = float(np.median([x[1] for x in hits]))
        host = float(np.median([x[2] for x in hits]))
        out.append(Finding(
            Bottleneck.LAUNCH_OVERHEAD, None, (rank,), top_ops(path_nodes, worst, (worst.path_rank == rank) & np.isin(
                worst.path_category, (CAT_INDEX[Category.CPU], CAT_INDEX[Category.LAUNCH_OVERHEAD]))),
            ms(np.median([x[0].wall_ns * x[2] for x in hits])),
            f"rank {rank}: host-bound in {len(hits)} of {len(rows)} steps: the GPU was busy {busy:.0%} of the "
            f"step while {host:.0%} of the critical path ran on the CPU issuing work; {len(kernels)} kernels of "
            f"median {np.median(kernels) / 1000 if len(kernels) else 0:.1f} µs against launch calls of median "
            f"{np.median(launches) / 1000 if len(launches) else 0:.1f} µs",
        ))
    return out


def _by_rank(reports: list[StepReport]) -> dict[int, list[StepReport]]:
    out: dict[int, list[StepReport]] = defaultdict(list)
    for r in reports:
        out[r.rank].append(r)
    return out


def _peers(values: np.ndarray, i: int) -> float:
    """Median of the other steps' values."""
    return float(np.median(np.delete(values, i)))


def host_syncs(g: ExecGraph, reports: list[StepReport], slow: set[int]) -> list[Finding]:
    """Slow steps with many more blocking syncs than their peers: each drains the GPU queue."""
    row_of = g.steps.row_of()
    is_sync = (g.kind == NodeKind.RUNTIME) & (g.role == Role.SYNC) & (g.step_row >= 0)
    counts = np.bincount(g.step_row[is_sync], minlength=len(g.steps))
    out = []
    for rank, mine in _by_rank(reports).items():
        rows = [row_of[(r.step, rank)] for r in mine]
        n = counts[rows].astype(np.float64)
        walls = np.array([r.wall_ns for r in mine], dtype=np.float64)
        for i, r in enumerate(mine):
            if len(mine) < 3 or r.step not in slow:
                continue
            excess = walls[i] - _peers(walls, i)
            if n[i] >= 2 * _peers(n, i) + 5 and excess >= max(MIN_NS, 0.10 * _peers(walls, i)):
                calls = sorted({g.node_name(int(x)) for x in np.flatnonzero(is_sync & (g.step_row == rows[i]))})
                out.append(Finding(
                    Bottleneck.HOST_SYNC, r.step, (rank,), tuple(calls[:5]), ms(excess),
                    f"rank {rank} step {r.step}: {int(n[i])} blocking syncs against a median of "
                    f"{_peers(n, i):g} in the rank's other steps; each drains the GPU queue, so the CPU "
                    f"waits and then launches again; the step took {ms(excess)} ms more than its peers",
                ))
    return out


def _p2p_names(g: ExecGraph, nodes: np.ndarray, top: int = 3) -> tuple[str, ...]:
    """The names of the send/recv ops ``nodes`` (ascending ids), most time first."""
    time: dict[str, int] = defaultdict(int)
    for x in nodes.tolist():
        time[g.node_name(x)] += int(g.dur_ns[x])
    return tuple(sorted(time, key=lambda name: (-time[name], name))[:top])


def pipeline_bubbles(g: ExecGraph, reports: list[StepReport], slow: set[int], path_nodes: PathNodes,
                     peers: dict[int, list[int]]) -> list[Finding]:
    """Pipeline stages whose GPU idles waiting for activations or gradients from a neighbour stage (``path_nodes``:
    those of the paths, which run through other ranks; ``peers``: ``path_nodes.p2p_peers``, of the job)."""
    p2p = p2p_nodes(g)
    nodes = np.flatnonzero(p2p)  # every member of a send/recv instance is one
    p2p_of = {rank: nodes[at] for rank, at in positions_by(g.rank[nodes]).items()}
    row_of = g.steps.row_of()
    busy_ns = gpu_busy_ns(g)
    out = []
    for rank, mine in _by_rank(reports).items():
        if rank not in p2p_of:
            continue
        own = p2p_of[rank]
        with_ranks = ", ".join(map(str, peers.get(rank, [])))
        walls = np.array([max(r.wall_ns, 1) for r in mine], dtype=np.float64)
        idle = walls - np.array([busy_ns[row_of[(r.step, rank)]] for r in mine], dtype=np.float64)
        anomalies = [i for i, r in enumerate(mine) if len(mine) >= 3 and r.step in slow
                     and idle[i] - _peers(idle, i) >= max(MIN_NS, 0.10 * _peers(walls, i))]
        for i in anomalies:
            out.append(Finding(
                Bottleneck.PIPELINE_BUBBLE, mine[i].step, (rank,),
                _p2p_names(g, own[g.step_row[own] == row_of[(mine[i].step, rank)]]), ms(idle[i] - _peers(idle, i)),
                f"rank {rank} step {mine[i].step}: the GPU idled {ms(idle[i])} ms against a median of "
                f"{ms(_peers(idle, i))} ms in the rank's other steps, waiting on send/recv with rank(s) {with_ranks}",
            ))
        share = idle / walls
        # chronic only when the critical path waits on send/recv: an idle GPU may be host-bound instead
        waits = np.array([r.path_dur_ns[(r.path_node >= 0) & path_nodes.p2p(np.maximum(r.path_node, 0))].sum()
                          for r in mine], dtype=np.float64) / walls
        if not anomalies and ((share >= 0.2) & (waits >= 0.1)).sum() * 2 >= len(mine):
            out.append(Finding(
                Bottleneck.PIPELINE_BUBBLE, None, (rank,), _p2p_names(g, own), ms(np.median(idle)),
                f"rank {rank}: a pipeline stage whose GPU idles {np.median(share):.0%} of each step "
                f"(median {ms(np.median(idle))} ms) waiting for activations or gradients from rank(s) {with_ranks}",
            ))
    return out
