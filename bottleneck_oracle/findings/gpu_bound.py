"""Findings the GPU agrees with, and the steps whose GPU is the bottleneck.

A host-side finding (launch overhead, a host sync, a host pause, a data-loading stall) on a rank with
GPU work claims no more than the time that rank's GPU did no work in the step: a faster host cannot
save time the GPU was working. A step whose GPU works most of its window is GPU-bound: its host-side
chronic findings go, and what it is bound by is said with the kernels and op classes that keep the GPU
busy. Work is computation and copies (``GpuTimeline.work_ns``): a collective kernel exposed on its own
waits for a late peer, so a straggler's victims are not GPU-bound.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from bottleneck_oracle.findings.finding import MIN_NS, Finding, ms
from bottleneck_oracle.graph.gpu_timeline import GpuTimeline
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.op_classes import OP_CLASSES, classify_strings
from bottleneck_oracle.graph.types import Bottleneck, NodeKind

__all__ = ["GPU_BOUND_SHARE", "HOST_SIDE", "GpuBound", "agree_with_gpu", "gpu_bound_steps", "gpu_rows"]

GPU_BOUND_SHARE = 0.75  # of a step's window: a GPU this busy leaves a faster host little to win
HOST_SIDE = frozenset({Bottleneck.LAUNCH_OVERHEAD, Bottleneck.HOST_SYNC, Bottleneck.HOST_PAUSE,
                       Bottleneck.DATALOADER_STALL})
_TOP = 5


@dataclass(frozen=True, slots=True)
class GpuBound:
    """A step (``None``: most steps of the rank) whose GPU was busy most of its window.

    Args:
        kernels (tuple[tuple[str, float], ...]): the kernels with most GPU time in it, (name, ms); for
            most steps of a rank, a step's mean.
        op_classes (tuple[tuple[str, float], ...]): GPU time by op class (``other`` for none), (class, ms),
            likewise.
    """

    step: int | None
    rank: int
    busy_share: float
    busy_ms: float
    wall_ms: float
    kernels: tuple[tuple[str, float], ...]
    op_classes: tuple[tuple[str, float], ...]

    @property
    def evidence(self) -> str:
        """One sentence: how busy, and with what."""
        where = f"rank {self.rank}" + (f" step {self.step}" if self.step is not None and self.step >= 0 else "")
        classes = ", ".join(f"{c} {t:g} ms" for c, t in self.op_classes[:3])
        top = self.kernels[0] if self.kernels else None
        lead = f"; the top kernel is {top[0][:80]!r} ({top[1]:g} ms)" if top else ""
        per = "" if self.step is not None else " (a step's mean)"
        return (f"{where}: GPU-bound: the GPU computed or copied {self.busy_share:.0%} of the step ({self.busy_ms:g} "
                f"of {self.wall_ms:g} ms); GPU time by op class{per}: {classes}{lead}")

    def to_dict(self) -> dict[str, object]:
        return {"step": self.step, "rank": self.rank, "busy_pct": round(100 * self.busy_share, 1),
                "busy_ms": self.busy_ms, "wall_ms": self.wall_ms,
                "kernels": [{"name": n, "ms": t} for n, t in self.kernels],
                "op_classes": [{"class": c, "ms": t} for c, t in self.op_classes], "evidence": self.evidence}


def gpu_rows(g: ExecGraph, gpu: GpuTimeline) -> dict[tuple[int, int], int]:
    """(step, rank) → row of ``g.steps`` (and of ``gpu``) for the ranks that recorded GPU work."""
    worked = set(np.unique(g.rank[g.trace.lanes.is_gpu[g.lane]]).tolist())
    return {key: i for key, i in g.steps.row_of().items() if key[1] in worked and gpu.total_ns[i] > 0}


def _gpu_time(g: ExecGraph, rows: list[int]) -> tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]:
    """Top kernels and op classes by GPU time among the GPU work of the steps ``rows``, a step's mean
    (set beside the median step's busy time, not the sum of every step's)."""
    work = np.flatnonzero(np.isin(g.kind, (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.COMM))
                          & np.isin(g.step_row, rows) & (g.parent < 0))
    by_name = np.bincount(g.name[work], weights=g.dur_ns[work], minlength=len(g.trace.strings)) / len(rows)
    names = np.argsort(-by_name, kind="stable")[:_TOP]
    kernels = tuple((g.trace.strings[n], ms(by_name[n])) for n in names.tolist() if by_name[n] > 0)
    op, _, _ = classify_strings(g.trace.strings)
    classes: dict[str, float] = defaultdict(float)
    for cls, dur in zip(op[g.name[work]].tolist(), g.dur_ns[work].tolist()):
        classes[OP_CLASSES[cls][0] if cls >= 0 else "other"] += dur / len(rows)
    ranked = sorted(classes.items(), key=lambda kv: -kv[1])
    return kernels, tuple((c, ms(t)) for c, t in ranked[:_TOP])


def gpu_bound_steps(g: ExecGraph, gpu: GpuTimeline, steps: list[tuple[int, int]]) -> list[GpuBound]:
    """The GPU-bound ones of ``steps`` ((step, rank) pairs), per rank: each such step when the rank has
    fewer than three, else one verdict for the rank when most of its steps are."""
    rows = gpu_rows(g, gpu)
    by_rank: dict[int, list[int]] = defaultdict(list)
    for key in steps:
        if key in rows:
            by_rank[key[1]].append(rows[key])
    out = []
    for rank, mine in sorted(by_rank.items()):
        bound = [i for i in mine if gpu.work_share(i) >= GPU_BOUND_SHARE]
        if len(mine) >= 3 and len(bound) * 2 <= len(mine):
            continue
        groups = [[i] for i in bound] if len(mine) < 3 else [bound]
        for group in groups:
            kernels, classes = _gpu_time(g, group)
            busy = float(np.median([gpu.work_ns(i) for i in group]))
            total = float(np.median([gpu.total_ns[i] for i in group]))
            out.append(GpuBound(int(g.steps.step[group[0]]) if len(group) == 1 and len(mine) < 3 else None, rank,
                                busy / total, ms(busy), ms(total), kernels, classes))
    return out


def agree_with_gpu(rows: dict[tuple[int, int], int], gpu: GpuTimeline, findings: list[Finding]) -> list[Finding]:
    """``findings`` with each host-side one capped at the time its ranks' GPU did no work in its step (the
    median step's for a chronic one); a chronic host-side finding of a GPU-bound rank, or one left under
    1 ms, is dropped (``rows``: ``gpu_rows``)."""
    idle_of: dict[int, list[int]] = defaultdict(list)
    share_of: dict[int, list[float]] = defaultdict(list)
    for (_, rank), i in rows.items():
        idle_of[rank].append(int(gpu.total_ns[i]) - gpu.work_ns(i))
        share_of[rank].append(gpu.work_share(i))
    out = []
    for f in findings:
        gpu_ranks = [r for r in f.ranks if r in idle_of]
        if f.category not in HOST_SIDE or not gpu_ranks:
            out.append(f)
            continue
        if f.step is None:
            if any(np.median(share_of[r]) >= GPU_BOUND_SHARE for r in gpu_ranks):
                continue
            idle = max(float(np.median(idle_of[r])) for r in gpu_ranks)
        else:
            at = [rows[(f.step, r)] for r in gpu_ranks if (f.step, r) in rows]
            if not at:
                out.append(f)
                continue
            idle = max(int(gpu.total_ns[i]) - gpu.work_ns(i) for i in at)
        if idle < MIN_NS:
            continue
        if ms(idle) < f.impact_ms:
            f = replace(f, impact_ms=ms(idle), evidence=f"{f.evidence}; capped at the {ms(idle)} ms the GPU did no work: "
                        "a faster host cannot save time the GPU was working")
        out.append(f)
    return out
