"""The discrete-event simulation: times of every node of the job, with interference, and the true step times.

Times follow from the dependencies by one pass in topological order (each node starts at
its latest constraint, a blocked node ends at its latest awaited end). Interference then
stretches every compute kernel by ``interference`` × the time it overlapped a transfer on
its GPU, and the pass is repeated; three passes settle the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.job import Job, Tuning
from bottleneck_oracle.synth.program import Dep, Kind, Program
from bottleneck_oracle.synth.training_step import build_program

__all__ = ["SimResult", "Timeline", "run", "simulate", "solve", "topological_order"]

PASSES = 3
_RANK_SPAN_NS = 1 << 44  # separates ranks' time lines when all are handled as one array (~4.9 hours each)


@dataclass(frozen=True, slots=True)
class SimResult:
    """True step times of a simulated job.

    Attributes:
        config: the job.
        steps: the ``ProfilerStep#N`` numbers.
        step_ms: float64[ranks, steps]: from the step's start on the CPU to the later of its
            CPU end and the end of the GPU work it launched, as ``graph/steps.py`` measures it.
    """

    config: SynthConfig
    steps: tuple[int, ...]
    step_ms: np.ndarray

    def ms(self, step: int, rank: int) -> float:
        """True time of ``ProfilerStep#step`` on ``rank``."""
        return float(self.step_ms[rank, self.steps.index(step)])

    def by_rank(self) -> dict[int, dict[int, float]]:
        """rank → step → ms."""
        return {r: {s: float(self.step_ms[r, i]) for i, s in enumerate(self.steps)}
                for r in range(self.step_ms.shape[0])}

    def job_step_ms(self) -> dict[int, float]:
        """step → time of its slowest rank."""
        return {s: float(self.step_ms[:, i].max()) for i, s in enumerate(self.steps)}


@dataclass(frozen=True, slots=True)
class Timeline:
    """Every node's simulated start and end (ns from the trace origin), with the graph and job tables."""

    program: Program
    job: Job
    start_ns: np.ndarray  # int64[N]
    end_ns: np.ndarray  # int64[N]
    dur_ns: np.ndarray  # int64[N]: durations after interference


def _point_edges(p: Program) -> tuple[np.ndarray, np.ndarray]:
    """Dependencies between points: 2·i is node i's start, 2·i+1 its end."""
    how = p.dep_type
    src = 2 * p.dep_src.astype(np.int64) + (how != Dep.START_AFTER_START)
    dst = 2 * p.dep_dst.astype(np.int64) + (how == Dep.END_AFTER_END)
    return src, dst


def topological_order(p: Program) -> list[int]:
    """Points in an order where every point follows the points it depends on (start before end)."""
    n = 2 * len(p)
    src, dst = _point_edges(p)
    starts = np.arange(0, n, 2)
    src, dst = np.concatenate([src, starts]), np.concatenate([dst, starts + 1])
    by_src = np.argsort(src, kind="stable")
    succ = dst[by_src].tolist()
    ptr = np.searchsorted(src[by_src], np.arange(n + 1)).tolist()
    indeg = np.bincount(dst, minlength=n)
    stack = np.flatnonzero(indeg == 0)[::-1].tolist()
    left = indeg.tolist()
    order: list[int] = []
    while stack:
        v = stack.pop()
        order.append(v)
        for k in range(ptr[v], ptr[v + 1]):
            w = succ[k]
            left[w] -= 1
            if left[w] == 0:
                stack.append(w)
    assert len(order) == n, f"the job deadlocks: {n - len(order)} points wait on a cycle"
    return order


def solve(p: Program, order: list[int], dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every node for given durations (one pass over the points in topological order)."""
    n = 2 * len(p)
    src_a, dst_a = _point_edges(p)
    by_dst = np.argsort(dst_a, kind="stable")
    src = src_a[by_dst].tolist()
    lag = p.dep_lag[by_dst].tolist()
    ptr = np.searchsorted(dst_a[by_dst], np.arange(n + 1)).tolist()
    d = dur.tolist()
    t = [0] * n
    for v in order:
        x = t[v - 1] + d[v >> 1] if v & 1 else 0
        for k in range(ptr[v], ptr[v + 1]):
            y = t[src[k]] + lag[k]
            if y > x:
                x = y
        t[v] = x
    times = np.array(t, dtype=np.int64)
    return times[0::2], times[1::2]


def _overlap(p: Program, start: np.ndarray, end: np.ndarray, kernels: np.ndarray) -> np.ndarray:
    """Time each kernel overlaps a transfer of a collective its GPU takes part in."""
    comm = np.flatnonzero(p.kind == Kind.COMM)
    coll = p.coll_of[comm]
    offset = p.rank.astype(np.int64) * _RANK_SPAN_NS
    a, b = start[coll] + offset[comm], end[coll] + offset[comm]
    if not len(a):
        return np.zeros(len(kernels), dtype=np.int64)
    order = np.argsort(a, kind="stable")
    a, b = a[order], np.maximum.accumulate(b[order])
    new = np.ones(len(a), dtype=bool)
    new[1:] = a[1:] > b[:-1]
    seg_start = a[new]
    seg_end = np.append(b[np.flatnonzero(new)[1:] - 1], b[-1])
    before = np.concatenate([[0], np.cumsum(seg_end - seg_start)])

    def covered(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(seg_start, t, side="right") - 1
        inside = np.clip(t - seg_start[np.maximum(k, 0)], 0, (seg_end - seg_start)[np.maximum(k, 0)])
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)

    s, e = start[kernels] + offset[kernels], end[kernels] + offset[kernels]
    return covered(e) - covered(s)


def _step_ms(p: Program, start: np.ndarray, end: np.ndarray, ranks: int, steps: int) -> np.ndarray:
    gpu = np.flatnonzero(p.launcher >= 0)
    gpu_end = np.zeros(ranks * steps, dtype=np.int64)
    np.maximum.at(gpu_end, p.rank[gpu].astype(np.int64) * steps + p.step[gpu], end[gpu])
    out = np.zeros((ranks, steps), dtype=np.float64)
    for rank, step, first, last in p.step_marks:
        out[rank, step] = (max(end[last], gpu_end[rank * steps + step]) - start[first]) / 1e6
    return out


def run(config: SynthConfig, tuning: Tuning | None = None) -> tuple[SimResult, Timeline]:
    """Builds and simulates the job.

    Args:
        config: the job.
        tuning: what-if speed-ups of the ground truth (default: none).

    Returns:
        The true step times and the full timeline (for the trace writer).
    """
    program, job = build_program(config, tuning)
    order = topological_order(program)
    dur = program.dur_ns.copy()
    kernels = np.flatnonzero(program.kind == Kind.KERNEL)
    start, end = solve(program, order, dur)
    for _ in range(PASSES - 1 if config.interference > 0 else 0):
        dur[kernels] = program.dur_ns[kernels] + np.rint(config.interference * _overlap(program, start, end, kernels))
        start, end = solve(program, order, dur)
    result = SimResult(config, tuple(config.recorded_steps), _step_ms(program, start, end, config.ranks, config.steps))
    return result, Timeline(program, job, start, end, dur)


def simulate(config: SynthConfig) -> SimResult:
    """True per-rank, per-step times of ``config``'s job, without writing traces.

    Example:
        ```python
        result = simulate(SynthConfig(model="1b", dp=2, tp=2, pp=2, microbatches=4))
        result.ms(step=2, rank=0)
        ```

    Args:
        config: the job.

    Returns:
        The step times.
    """
    return run(config)[0]
