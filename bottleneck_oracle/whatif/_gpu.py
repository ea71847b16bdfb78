"""What a step's GPU did, as the what-if engine needs it: the time its kernels and copies kept it busy
(no host-side change makes the step shorter) and its GPU-bound verdict (then kernel-side changes
are the ones worth proposing). Exposed communication is left out of both: a collective's kernel
waiting for a late peer is no work a faster host could not save (``GpuTimeline.work_ns``)."""

from __future__ import annotations

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.findings.gpu_bound import GPU_BOUND_SHARE, HOST_SIDE, GpuBound, gpu_bound_steps
from bottleneck_oracle.truth.edits import Edit, EditKind

__all__ = ["HOST_SIDE", "gpu_bound_of", "gpu_busy_ms", "is_host_side"]


def _rows(a: Analysis, step: int) -> list[tuple[int, int]]:
    """(row of ``a.graph.steps``, rank) of the step's complete reports on ranks with GPU work, the
    slowest report first."""
    g, worked = a.graph, set(a.gpu_trace.rank.tolist())
    rows = g.steps.row_of()
    reports = sorted((r for r in a.steps if r.step == step and (r.step, r.rank) not in a.partial_steps),
                     key=lambda r: (-r.wall_ns, r.rank))
    return [(rows[(step, r.rank)], r.rank) for r in reports if r.rank in worked and (step, r.rank) in rows]


def gpu_busy_ms(a: Analysis, step: int) -> float | None:
    """The most any of the step's complete ranks had its GPU busy with kernels and copies in the
    step's window (ms); None when none of them recorded GPU work."""
    rows = _rows(a, step)
    return round(max(a.gpu.work_ns(i) for i, _ in rows) / 1e6, 3) if rows else None


def gpu_bound_of(a: Analysis, step: int) -> GpuBound | None:
    """The GPU-bound verdict of the step's slowest complete rank (the one whose time is the step's),
    None when that rank's kernels and copies did not keep its GPU busy most of the step."""
    rows = _rows(a, step)
    if not rows:
        return None
    i, rank = rows[0]
    if a.gpu.work_ns(i) < GPU_BOUND_SHARE * int(a.gpu.total_ns[i]):
        return None
    return next(iter(gpu_bound_steps(a.graph, a.gpu, [(step, rank)])), None)


def is_host_side(edits: tuple[Edit, ...]) -> bool:
    """Whether every edit is the fix of a host-side bottleneck (launches, syncs, pauses, data loading)."""
    return bool(edits) and all(e.kind == EditKind.FIX and e.category in HOST_SIDE for e in edits)
