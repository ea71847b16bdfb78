"""Detectors of the host and the step: stragglers, host pauses, checkpoints, slow compute, category anomalies."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np

from bottleneck_oracle.graph.collectives import CollectiveArrival, collective_arrivals
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import ANOMALY_SHARE, CAT_INDEX, MIN_NS, Finding, ms, top_ops
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.intervals import merged
from bottleneck_oracle.graph.path_nodes import PathNodes
from bottleneck_oracle.findings.python_frames import python_self_time
from bottleneck_oracle.graph.types import Bottleneck, Category, NodeKind, Role

__all__ = ["category_findings", "checkpoints", "compute_time", "host_pauses", "late_arrivals", "late_ns",
           "neighbour_op", "slow_compute", "straggler_findings", "stragglers"]

STRAGGLER_SHARE = 0.25  # of the late rank's median step: lateness that makes a straggler
PAUSE_SHARE = 0.10  # of the step: a host pause in a slow step
CHRONIC_PAUSE_SHARE = 0.25  # of the step: a host pause in any step
FRAMES_SHARE = 0.5  # of a pause: recorded Python frames' own time that makes it Python work, named
PYTHON_TOP = 3  # functions named


def category_findings(
    path_nodes: PathNodes, reports: list[StepReport], slow: set[int], kind: Bottleneck,
    amount: Callable[[StepReport], int], ops_mask: Callable[[StepReport], np.ndarray], what: str,
    chronic_share: float | None,
) -> list[Finding]:
    out: list[Finding] = []
    by_rank: dict[int, list[StepReport]] = defaultdict(list)
    for r in reports:
        by_rank[r.rank].append(r)
    chronic: dict[tuple[int, ...], list[tuple[StepReport, int]]] = defaultdict(list)
    for rank, steps in by_rank.items():
        values = np.array([amount(r) for r in steps], dtype=np.float64)
        walls = np.array([r.wall_ns for r in steps], dtype=np.float64)
        for i, r in enumerate(steps):
            if len(steps) >= 3 and r.step in slow:
                peers = float(np.median(np.delete(values, i)))
                excess = values[i] - peers
                if excess >= max(MIN_NS, ANOMALY_SHARE * float(np.median(np.delete(walls, i)))):
                    # the category grew by `excess`, but the step can have lost no more than its own excess
                    slower = walls[i] - float(np.median(np.delete(walls, i)))
                    out.append(Finding(
                        kind, r.step, (rank,), top_ops(path_nodes, r, ops_mask(r)), ms(max(min(excess, slower), 0.0)),
                        f"rank {rank} step {r.step}: {what} took {ms(values[i])} ms of the critical path "
                        f"against a median of {ms(peers)} ms in the rank's other steps",
                    ))
                    continue
            if chronic_share is not None and values[i] >= max(MIN_NS, chronic_share * walls[i]):
                chronic[(rank,)].append((r, int(values[i])))
    for ranks, hits in chronic.items():
        total_steps = len(by_rank[ranks[0]])
        if len(hits) * 2 < total_steps:
            continue
        worst = max(hits, key=lambda h: h[1])[0]
        share = np.median([v / r.wall_ns for r, v in hits])
        out.append(Finding(
            kind, None, ranks, top_ops(path_nodes, worst, ops_mask(worst)), ms(np.median([v for _, v in hits])),
            f"rank {ranks[0]}: {what} takes {share:.0%} of the wall time in {len(hits)} of "
            f"{total_steps} steps (median {ms(np.median([v for _, v in hits]))} ms a step)",
        ))
    return out


def host_pauses(g: ExecGraph, reports: list[StepReport], slow: set[int], path_nodes: PathNodes) -> list[Finding]:
    """Idle time of a step's thread on its critical path (``path_nodes``: those of the paths, which run
    through other ranks)."""
    out = []
    idle = CAT_INDEX[Category.IDLE]
    for r in reports:
        share = PAUSE_SHARE if r.step in slow else CHRONIC_PAUSE_SHARE
        node = np.maximum(r.path_node, 0)
        on_thread = (r.path_node < 0) | np.isin(path_nodes.kinds(node), (NodeKind.ANNOTATION, NodeKind.PYTHON))
        seg = np.flatnonzero((r.path_category == idle) & (r.path_rank == r.rank) & on_thread)
        for i in seg[r.path_dur_ns[seg] >= max(MIN_NS, share * r.wall_ns)].tolist():
            before = neighbour_op(path_nodes, r, i, -1)
            after = neighbour_op(path_nodes, r, i, +1)
            mine = 0 <= r.path_node[i] < len(g)  # a scan's task numbers the other ranks' nodes after its own
            lane = g.trace.lanes.label[g.lane[r.path_node[i]]] if mine else "a thread"
            frames = _python_frames(g, r, i)
            out.append(Finding(
                Bottleneck.HOST_PAUSE, r.step, (r.rank,), tuple(x for x in (before, after) if x),
                ms(r.path_dur_ns[i]),
                f"rank {r.rank} step {r.step}: {lane} ran {'Python but ' if frames else ''}no profiled op for "
                f"{ms(r.path_dur_ns[i])} ms ({ms(r.path_start_ns[i] - r.start_ns)} ms into the step), "
                f"between '{before or 'step start'}' and '{after or 'step end'}'{frames}",
            ))
    return out


def _python_frames(g: ExecGraph, r: StepReport, i: int) -> str:
    """``; its Python frames' own time: f 104.917 ms, ...`` when recorded frames fill most of the pause
    of ``r``'s path segment ``i`` (a ``with_stack`` trace), else ``""``."""
    if not 0 <= r.path_node[i] < len(g):
        return ""
    lo = int(r.path_start_ns[i])
    own = python_self_time(g.trace, int(g.lane[r.path_node[i]]), lo, lo + int(r.path_dur_ns[i]))
    if sum(own.values()) < FRAMES_SHARE * r.path_dur_ns[i]:
        return ""
    top = ", ".join(f"{name} {ms(ns)} ms" for name, ns in own.most_common(PYTHON_TOP))
    return f"; its Python frames' own time: {top}"


def neighbour_op(path_nodes: PathNodes, r: StepReport, i: int, step: int) -> str:
    """The nearest op on ``r``'s critical path before (``step`` -1) or after (+1) its segment ``i``."""
    j = i + step
    while 0 <= j < len(r.path_node):
        node = int(r.path_node[j])
        if node >= 0 and path_nodes.kinds(np.array([node]))[0] != NodeKind.ANNOTATION:
            return path_nodes.node_name(node)
        j += step
    return ""


def stragglers(g: ExecGraph, reports: list[StepReport], slow: set[int]) -> list[Finding]:
    """The last rank to reach a collective, when the others waited for it inside.

    Reported for slow steps (every step when there are too few to compare), and once for a
    rank that is late in most steps (chronic).
    """
    return straggler_findings(collective_arrivals(g), reports, slow, g.node_name)


def straggler_findings(arrivals: list[CollectiveArrival], reports: list[StepReport], slow: set[int],
                       name_of: Callable[[int], str]) -> list[Finding]:
    """``stragglers`` from the collectives' arrivals, wherever they were read (``name_of``: a member's op
    name); what the late rank spent its step on is said when ``reports`` carry breakdowns."""
    late = late_arrivals(arrivals, reports)
    out = []
    steps_of = {r.step for r in reports}
    for rank in sorted({rank for _, rank in late}):
        mine = {step: hits for (step, r), hits in late.items() if r == rank}
        if len(steps_of) >= 3 and len(mine) * 2 > len(steps_of):
            total = float(np.median([late_ns(hits) for hits in mine.values()]))
            out.append(Finding(
                Bottleneck.STRAGGLER_RANK, None, (rank,), (name_of(next(iter(mine.values()))[0].last_node),),
                ms(total), f"rank {rank} reached collectives late in {len(mine)} of {len(steps_of)} steps "
                f"(median {ms(total)} ms a step); the other ranks waited inside",
            ))
            continue
        for step, hits in mine.items():
            if step in slow or len(steps_of) < 3:  # too few steps to tell slow ones: report all
                out.append(_straggler_finding(name_of, reports, step, rank, hits))
    return out


def late_arrivals(arrivals: list[CollectiveArrival], reports: list[StepReport]
                  ) -> dict[tuple[int, int], list[CollectiveArrival]]:
    """(step, rank) -> the collectives the rank reached late by its own doing (what makes it a straggler)."""
    wall = defaultdict(list)
    for r in reports:
        wall[r.rank].append(r.wall_ns)
    typical = {rank: float(np.median(w)) for rank, w in wall.items()}
    late: dict[tuple[int, int], list[CollectiveArrival]] = defaultdict(list)
    for c in arrivals:
        if c.kind == "sendrecv" and len(c.ranks) == 2:
            continue  # a pipeline receive is posted early by design: that is a bubble, not a straggler
        # a rank late only by what it waited for itself passes the lateness on: not a straggler
        if c.own_ns >= max(MIN_NS, STRAGGLER_SHARE * typical.get(c.last_rank, 0.0)):
            late[(c.step, c.last_rank)].append(c)
    return late


def late_ns(hits: list[CollectiveArrival]) -> int:
    """Time the others spent waiting for the late rank: the union of its late arrivals (collectives
    in flight together, such as two DDP buckets, are waited for once, not once each)."""
    end = np.array([h.arrived_ns for h in hits], dtype=np.int64)
    s, e = merged(end - np.array([h.lateness_ns for h in hits], dtype=np.int64), end)
    return int((e - s).sum())


def _straggler_finding(name_of: Callable[[int], str], reports: list[StepReport], step: int, rank: int,
                       hits: list[CollectiveArrival]) -> Finding:
    worst = max(hits, key=lambda h: h.lateness_ns)
    waiting = sorted({w for h in hits for w in h.ranks} - {rank})
    cause = _late_cause(reports, step, rank)
    return Finding(
        Bottleneck.STRAGGLER_RANK, step, (rank,), (name_of(worst.last_node),), ms(late_ns(hits)),
        f"rank {rank} reached {len(hits)} collective(s) of step {step} late, by up to {ms(worst.lateness_ns)} ms "
        f"(first: {name_of(worst.last_node)}); rank(s) {', '.join(map(str, waiting))} waited inside"
        + (f"; before arriving, rank {rank} spent {cause}" if cause else ""),
        waiting=tuple(waiting),
    )


def _late_cause(reports: list[StepReport], step: int, rank: int) -> str:
    for r in reports:
        if r.step == step and r.rank == rank:
            totals = {c: v for c, v in r.breakdown_ns.items() if v >= MIN_NS}
            if totals:
                c = max(totals, key=totals.__getitem__)
                return f"{ms(totals[c])} ms in {c.value}"
    return ""


def checkpoints(reports: list[StepReport], path_nodes: PathNodes) -> list[Finding]:
    """Checkpointing on a step's critical path (``path_nodes``: those of the paths)."""
    out = []
    for r in reports:
        mask = (r.path_node >= 0) & (r.path_rank == r.rank)
        mask[mask] = path_nodes.in_checkpoint(r.path_node[mask])
        spent = int(r.path_dur_ns[mask].sum())
        if spent >= max(MIN_NS, 0.05 * r.wall_ns):
            held = r.path_node[mask]
            names = tuple(dict.fromkeys(path_nodes.node_name(n) for n in held[path_nodes.roles(held) == Role.CHECKPOINT]
                                        .tolist()))
            out.append(Finding(
                Bottleneck.CHECKPOINT_STALL, r.step, (r.rank,), names or top_ops(path_nodes, r, mask), ms(spent),
                f"rank {r.rank} step {r.step}: checkpointing held the critical path for {ms(spent)} ms "
                f"({spent / r.wall_ns:.0%} of the step)",
            ))
    return out


def compute_time(g: ExecGraph) -> tuple[np.ndarray, np.ndarray]:
    """Per node, its compute time: kernel/copy durations on GPU ranks, CPU op self time on CPU-only ranks."""
    lanes = g.trace.lanes
    gpu_rank = np.zeros(int(lanes.rank.max()) + 1 if len(lanes) else 0, dtype=bool)
    gpu_rank[lanes.rank[lanes.is_gpu]] = True
    child = np.zeros(len(g), dtype=np.int64)
    has_parent = g.parent >= 0
    np.add.at(child, g.parent[has_parent], g.dur_ns[has_parent])
    self_ns = np.maximum(g.dur_ns - child, 0)
    on_gpu = lanes.is_gpu[g.lane]
    is_compute = np.where(gpu_rank[g.rank], on_gpu & np.isin(g.kind, (NodeKind.KERNEL, NodeKind.MEMCPY)),
                          g.kind == NodeKind.CPU_OP)
    return np.where(is_compute, np.where(on_gpu, g.dur_ns, self_ns), 0), is_compute


def slow_compute(g: ExecGraph, reports: list[StepReport], slow: set[int]) -> list[Finding]:
    """Compute ops of a slow step that took longer than the same ops in the rank's other steps."""
    compute, is_compute = compute_time(g)
    rows = g.step_row
    total = np.bincount(rows[rows >= 0], weights=compute[rows >= 0], minlength=len(g.steps))
    out = []
    for rank in np.unique(g.steps.rank).tolist():
        mine = np.flatnonzero((g.steps.rank == rank) & (g.steps.step >= 0))
        walls = (g.steps.end_ns - g.steps.start_ns)[mine]
        for i, row in enumerate(mine.tolist()):
            step = int(g.steps.step[row])
            if len(mine) < 3 or step not in slow:
                continue
            peers = float(np.median(np.delete(total[mine], i)))
            excess = total[row] - peers
            if excess >= max(MIN_NS, ANOMALY_SHARE * float(np.median(np.delete(walls, i)))):
                out.append(Finding(
                    Bottleneck.SLOW_COMPUTE, step, (rank,), _slowest_ops(g, compute, is_compute, row, mine),
                    ms(excess), f"rank {rank} step {step}: compute ops ran {ms(total[row])} ms against a "
                    f"median of {ms(peers)} ms in the rank's other steps",
                ))
    return out


def _slowest_ops(g: ExecGraph, compute: np.ndarray, is_compute: np.ndarray, row: int,
                 rows: np.ndarray) -> tuple[str, ...]:
    """Op names whose total time in the step grew most over their median in the other steps."""
    per_step: dict[int, dict[int, float]] = {}
    for r in rows.tolist():
        nodes = np.flatnonzero((g.step_row == r) & is_compute)
        names, inverse = np.unique(g.name[nodes], return_inverse=True)
        per_step[r] = dict(zip(names.tolist(), np.bincount(inverse, weights=compute[nodes]).tolist()))
    others = [r for r in rows.tolist() if r != row]
    growth = {n: t - float(np.median([per_step[r].get(n, 0.0) for r in others])) for n, t in per_step[row].items()}
    top = sorted((n for n in growth if growth[n] > 0), key=lambda n: -growth[n])[:5]
    return tuple(g.trace.strings[n] for n in top)
