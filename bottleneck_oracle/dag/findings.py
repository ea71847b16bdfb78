"""Bottleneck detectors: turn critical paths and step comparisons into findings with evidence.

Two kinds of finding: an anomaly (a step spends much more time in a category
than the median of its rank's other steps) and a chronic bottleneck (a
category takes a large share of most steps). Each names the ranks, the ops on
the critical path, and the time at stake in ms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.dag.collectives import collective_arrivals
from bottleneck_oracle.dag.critical_path import StepReport
from bottleneck_oracle.dag.graph import ExecGraph
from bottleneck_oracle.dag.types import CATEGORIES, Bottleneck, Category, NodeKind, Role

__all__ = ["Finding", "find_bottlenecks"]

MIN_NS = 1_000_000  # nothing under 1 ms is worth a finding
ANOMALY_SHARE = 0.10  # of the median step: how much extra time makes an anomaly (in a slow step)
STRAGGLER_SHARE = 0.25  # of the late rank's median step: lateness that makes a straggler
PAUSE_SHARE = 0.10  # of the step: a host pause in a slow step
CHRONIC_PAUSE_SHARE = 0.25  # of the step: a host pause in any step
_IDX = {c: i for i, c in enumerate(CATEGORIES)}


@dataclass(frozen=True, slots=True)
class Finding:
    """One bottleneck, with the evidence for it.

    Args:
        category (Bottleneck): what kind of bottleneck.
        step (int | None): the step, or None for every step (chronic).
        ranks (tuple[int, ...]): ranks it concerns (the late rank for a straggler).
        ops (tuple[str, ...]): ops on the critical path that show it, worst first.
        impact_ms (float): time at stake: excess over peers, or the time spent.
        evidence (str): one or two sentences with the numbers.
    """

    category: Bottleneck
    step: int | None
    ranks: tuple[int, ...]
    ops: tuple[str, ...]
    impact_ms: float
    evidence: str


def _ms(ns: float) -> float:
    return round(float(ns) / 1e6, 3)


def _own(r: StepReport, cat: Category) -> int:
    mask = (r.path_category == _IDX[cat]) & (r.path_rank == r.rank)
    return int(r.path_dur_ns[mask].sum())


def _top_ops(g: ExecGraph, r: StepReport, mask: np.ndarray, k: int = 5) -> tuple[str, ...]:
    totals: dict[str, int] = defaultdict(int)
    for node, dur in zip(r.path_node[mask].tolist(), r.path_dur_ns[mask].tolist()):
        if node >= 0:
            totals[g.node_name(node)] += dur
    return tuple(sorted(totals, key=lambda n: -totals[n])[:k])


def _category_findings(
    g: ExecGraph, reports: list[StepReport], slow: set[int], kind: Bottleneck,
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
                    out.append(Finding(
                        kind, r.step, (rank,), _top_ops(g, r, ops_mask(r)), _ms(excess),
                        f"rank {rank} step {r.step}: {what} took {_ms(values[i])} ms of the critical path "
                        f"against a median of {_ms(peers)} ms in the rank's other steps",
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
            kind, None, ranks, _top_ops(g, worst, ops_mask(worst)), _ms(np.median([v for _, v in hits])),
            f"rank {ranks[0]}: {what} takes {share:.0%} of the wall time in {len(hits)} of "
            f"{total_steps} steps (median {_ms(np.median([v for _, v in hits]))} ms a step)",
        ))
    return out


def _host_pauses(g: ExecGraph, reports: list[StepReport], slow: set[int]) -> list[Finding]:
    out = []
    idle = _IDX[Category.IDLE]
    for r in reports:
        share = PAUSE_SHARE if r.step in slow else CHRONIC_PAUSE_SHARE
        node = np.maximum(r.path_node, 0)
        on_thread = (r.path_node < 0) | np.isin(g.kind[node], (NodeKind.ANNOTATION, NodeKind.PYTHON))
        seg = np.flatnonzero((r.path_category == idle) & (r.path_rank == r.rank) & on_thread)
        for i in seg[r.path_dur_ns[seg] >= max(MIN_NS, share * r.wall_ns)].tolist():
            before = _neighbour_op(g, r, i, -1)
            after = _neighbour_op(g, r, i, +1)
            lane = g.trace.lanes.label[g.lane[r.path_node[i]]] if r.path_node[i] >= 0 else "a thread"
            out.append(Finding(
                Bottleneck.HOST_PAUSE, r.step, (r.rank,), tuple(x for x in (before, after) if x),
                _ms(r.path_dur_ns[i]),
                f"rank {r.rank} step {r.step}: {lane} ran no profiled op for "
                f"{_ms(r.path_dur_ns[i])} ms ({_ms(r.path_start_ns[i] - r.start_ns)} ms into the step), "
                f"between '{before or 'step start'}' and '{after or 'step end'}'",
            ))
    return out


def _neighbour_op(g: ExecGraph, r: StepReport, i: int, step: int) -> str:
    j = i + step
    while 0 <= j < len(r.path_node):
        node = r.path_node[j]
        if node >= 0 and g.kind[node] != NodeKind.ANNOTATION:
            return g.node_name(node)
        j += step
    return ""


def _stragglers(g: ExecGraph, reports: list[StepReport], slow: set[int]) -> list[Finding]:
    """The last rank to reach a collective, when the others waited for it inside.

    Reported for slow steps (every step when there are too few to compare), and once for a
    rank that is late in most steps (chronic).
    """
    wall = defaultdict(list)
    for r in reports:
        wall[r.rank].append(r.wall_ns)
    typical = {rank: float(np.median(w)) for rank, w in wall.items()}
    late: dict[tuple[int, int], list[tuple[int, int, list[int]]]] = defaultdict(list)
    for c in collective_arrivals(g):
        if c.lateness_ns >= max(MIN_NS, STRAGGLER_SHARE * typical.get(c.last_rank, 0.0)):
            waiting = sorted(set(c.ranks) - {c.last_rank})
            late[(c.step, c.last_rank)].append((c.lateness_ns, c.last_node, waiting))
    out = []
    steps_of = {r.step for r in reports}
    for rank in sorted({rank for _, rank in late}):
        mine = {step: hits for (step, r), hits in late.items() if r == rank}
        if len(steps_of) >= 3 and len(mine) * 2 >= len(steps_of):
            total = float(np.median([sum(h[0] for h in hits) for hits in mine.values()]))
            out.append(Finding(
                Bottleneck.STRAGGLER_RANK, None, (rank,), (g.node_name(next(iter(mine.values()))[0][1]),),
                _ms(total), f"rank {rank} reached collectives late in {len(mine)} of {len(steps_of)} steps "
                f"(median {_ms(total)} ms a step); the other ranks waited inside",
            ))
            continue
        for step, hits in mine.items():
            if step in slow or len(steps_of) < 3:  # too few steps to tell slow ones: report all
                out.append(_straggler_finding(g, reports, step, rank, hits))
    return out


def _straggler_finding(g: ExecGraph, reports: list[StepReport], step: int, rank: int,
                       hits: list[tuple[int, int, list[int]]]) -> Finding:
    worst = max(hits, key=lambda h: h[0])
    waiting = sorted({w for _, _, ws in hits for w in ws})
    cause = _late_cause(g, reports, step, rank)
    return Finding(
        Bottleneck.STRAGGLER_RANK, step, (rank,), (g.node_name(worst[1]),), _ms(sum(h[0] for h in hits)),
        f"rank {rank} reached {len(hits)} collective(s) of step {step} late, by up to {_ms(worst[0])} ms "
        f"(first: {g.node_name(worst[1])}); rank(s) {', '.join(map(str, waiting))} waited inside"
        + (f"; before arriving, rank {rank} spent {cause}" if cause else ""),
    )


def _late_cause(g: ExecGraph, reports: list[StepReport], step: int, rank: int) -> str:
    for r in reports:
        if r.step == step and r.rank == rank:
            totals = {c: v for c, v in r.breakdown_ns.items() if v >= MIN_NS}
            if totals:
                c = max(totals, key=totals.__getitem__)
                return f"{_ms(totals[c])} ms in {c.value}"
    return ""


def _checkpoints(g: ExecGraph, reports: list[StepReport]) -> list[Finding]:
    in_ckpt = np.zeros(len(g), dtype=bool)
    in_ckpt[g.role == Role.CHECKPOINT] = True
    for d in range(1, int(g.depth.max()) + 1 if len(g) else 0):
        at = np.flatnonzero(g.depth == d)
        in_ckpt[at] |= in_ckpt[g.parent[at]]
    out = []
    for r in reports:
        mask = (r.path_node >= 0) & (r.path_rank == r.rank)
        mask[mask] = in_ckpt[r.path_node[mask]]
        spent = int(r.path_dur_ns[mask].sum())
        if spent >= max(MIN_NS, 0.05 * r.wall_ns):
            names = tuple(dict.fromkeys(g.node_name(n) for n in r.path_node[mask] if g.role[n] == Role.CHECKPOINT))
            out.append(Finding(
                Bottleneck.CHECKPOINT_STALL, r.step, (r.rank,), names or _top_ops(g, r, mask), _ms(spent),
                f"rank {r.rank} step {r.step}: checkpointing held the critical path for {_ms(spent)} ms "
                f"({spent / r.wall_ns:.0%} of the step)",
            ))
    return out


def _compute_time(g: ExecGraph) -> tuple[np.ndarray, np.ndarray]:
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


def _slow_compute(g: ExecGraph, reports: list[StepReport], slow: set[int]) -> list[Finding]:
    """Compute ops of a slow step that took longer than the same ops in the rank's other steps."""
    compute, is_compute = _compute_time(g)
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
                    _ms(excess), f"rank {rank} step {step}: compute ops ran {_ms(total[row])} ms against a "
                    f"median of {_ms(peers)} ms in the rank's other steps",
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


def _gpu_busy_ns(g: ExecGraph, row: int) -> tuple[int, np.ndarray]:
    """Time some GPU stream of the step's rank was busy inside the step, and its kernels' durations."""
    steps = g.steps
    lanes = g.trace.lanes
    mine = np.flatnonzero((g.step_row == row) & lanes.is_gpu[g.lane] & (g.parent < 0))
    lo, hi = int(steps.start_ns[row]), int(steps.end_ns[row])
    s = np.clip(g.start_ns[mine], lo, hi)
    e = np.clip(g.end_ns[mine], lo, hi)
    order = np.argsort(s)
    s, e = s[order], np.maximum.accumulate(e[order]) if len(e) else e
    covered = int((e - np.maximum(s, np.concatenate([[lo], e[:-1]]))).clip(min=0).sum()) if len(s) else 0
    return covered, g.dur_ns[mine[g.kind[mine] == NodeKind.KERNEL]]


def _host_bound(g: ExecGraph, reports: list[StepReport]) -> list[Finding]:
    """GPU ranks whose GPU mostly waits while the critical path runs on the host (launch-bound)."""
    lanes = g.trace.lanes
    out = []
    row_of = {(int(s), int(r)): i for i, (s, r) in enumerate(zip(g.steps.step, g.steps.rank))}
    by_rank: dict[int, list[tuple[StepReport, float, float, np.ndarray]]] = defaultdict(list)
    for r in reports:
        if not (lanes.is_gpu & (lanes.rank == r.rank)).any() or r.wall_ns < MIN_NS:
            continue
        busy, kernels = _gpu_busy_ns(g, row_of[(r.step, r.rank)])
        host = _own(r, Category.CPU) + _own(r, Category.LAUNCH_OVERHEAD)
        by_rank[r.rank].append((r, busy / r.wall_ns, host / r.wall_ns, kernels))
    for rank, rows in by_rank.items():
        hits = [x for x in rows if x[1] < 0.5 and x[2] >= 0.5]
        if not hits or len(hits) * 2 < len(rows):
            continue
        kernels = np.concatenate([k for *_, k in hits])
        launches = g.dur_ns[(g.rank == rank) & (g.role == Role.LAUNCH)]
        worst = max(hits, key=lambda x: x[2])[0]
        busy = float(np.median([x[1] for x in hits]))
        host = float(np.median([x[2] for x in hits]))
        out.append(Finding(
            Bottleneck.LAUNCH_OVERHEAD, None, (rank,), _top_ops(g, worst, (worst.path_rank == rank) & np.isin(
                worst.path_category, (_IDX[Category.CPU], _IDX[Category.LAUNCH_OVERHEAD]))),
            _ms(np.median([x[0].wall_ns * x[2] for x in hits])),
            f"rank {rank}: host-bound in {len(hits)} of {len(rows)} steps: the GPU was busy {busy:.0%} of the "
            f"step while {host:.0%} of the critical path ran on the CPU issuing work; {len(kernels)} kernels of "
            f"median {np.median(kernels) / 1000 if len(kernels) else 0:.1f} µs against launch calls of median "
            f"{np.median(launches) / 1000 if len(launches) else 0:.1f} µs",
        ))
    return out


def find_bottlenecks(g: ExecGraph, reports: list[StepReport], slow_steps: set[int]) -> list[Finding]:
    """Every finding of every detector, largest impact first.

    Args:
        slow_steps: step numbers slow on some rank; step anomalies are looked for only there.
    """
    own = lambda cat: (lambda r: _own(r, cat))  # noqa: E731
    mask = lambda cat: (lambda r: (r.path_category == _IDX[cat]) & (r.path_rank == r.rank))  # noqa: E731
    slow = slow_steps
    found = (
        _stragglers(g, reports, slow) + _host_pauses(g, reports, slow) + _checkpoints(g, reports)
        + _host_bound(g, reports)
        + _slow_compute(g, reports, slow)
        + _category_findings(g, reports, slow, Bottleneck.DATALOADER_STALL, own(Category.DATA_LOADING),
                             mask(Category.DATA_LOADING), "data loading", 0.15)
        + _category_findings(g, reports, slow, Bottleneck.EXPOSED_COMMUNICATION, own(Category.COMMUNICATION),
                             mask(Category.COMMUNICATION), "communication not hidden by compute", 0.25)
        + _category_findings(g, reports, slow, Bottleneck.HOST_SYNC, own(Category.SYNC_WAIT),
                             mask(Category.SYNC_WAIT), "blocking synchronisation", 0.15)
        + _category_findings(g, reports, slow, Bottleneck.LAUNCH_OVERHEAD, own(Category.LAUNCH_OVERHEAD),
                             mask(Category.LAUNCH_OVERHEAD), "kernel launch overhead", 0.30)
    )
    best: dict[tuple[Bottleneck, int | None, tuple[int, ...]], Finding] = {}
    for f in sorted(found, key=lambda f: -f.impact_ms):  # one finding per kind, step and ranks
        best.setdefault((f.category, f.step, f.ranks), f)
    return list(best.values())
