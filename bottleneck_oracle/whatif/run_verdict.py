"""What bounds a run, over its steady steps: one rule that ``oracle analyze``, ``oracle ask``, ``oracle diff``,
MCP and the page all state.

A run is GPU-bound only when its GPU is saturated (busy ``GPU_SATURATED_PCT`` of the steady steps' wall) and
nothing removable is large; otherwise its verdict is its largest removable cause, the GPU's idle share beside
it. A cause is a group of the critical path's attribution (``GROUPS``); what removing it saves is the
what-if's (``fix`` of every finding of its group on the step, replayed, with the prediction's interval), the
median over the steady steps, and never more than the cause's own time on the path. A cause no finding
names has its exposed time and no saving: the trace shows the time, not the change that would remove it.
With nothing large to remove and an idle GPU, the verdict is the largest exposed cause.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.analysis.diff import Steady, steady_steps
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.findings.cause import OWN
from bottleneck_oracle.findings.finding import untraced_wait_ns
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.vocabulary import Bottleneck
from bottleneck_oracle.whatif.predict import predict_whatif

__all__ = ["GPU_SATURATED_PCT", "GROUPS", "LARGE_PCT", "LAUNCH_BOUND_GROUPS", "Cause", "RunVerdict", "run_verdict"]

GPU_SATURATED_PCT = 85.0  # of the steady steps' wall: a GPU this busy has little left to give
LARGE_PCT = 10.0  # of the median steady step: a removable cause saving this much decides the verdict
MAX_REPLAYS = 8  # steady steps replayed per cause (evenly picked): a long run's median needs no more

# the attribution's categories by what bounds a run, with the findings whose fix removes each
GROUPS: dict[str, tuple[tuple[str, ...], tuple[Bottleneck, ...]]] = {
    "input": (("data_loading",), (Bottleneck.DATALOADER_STALL,)),
    "communication": (("communication", "sync_wait"),
                      (Bottleneck.EXPOSED_COMMUNICATION, Bottleneck.STRAGGLER_RANK, Bottleneck.PIPELINE_BUBBLE)),
    "host": (("cpu", "idle"), (Bottleneck.HOST_PAUSE, Bottleneck.HOST_SYNC, Bottleneck.CHECKPOINT_STALL)),
    "launch": (("launch_overhead",), (Bottleneck.LAUNCH_OVERHEAD,)),
    "gpu": (("gpu_compute",), (Bottleneck.SLOW_COMPUTE,)),
    "untraced": (("untraced_wait",), ()),
}
_WORDS = {"input": "the input pipeline (data loading)", "communication": "exposed communication",
          "host": "host work (Python, CPU ops, gaps between them)", "launch": "kernel launch overhead",
          "gpu": "GPU work", "untraced": "GPU waits on work the trace does not hold"}
# A launch-overhead finding says the host's CPU ops are the work of issuing kernels, and its fix cuts them
# (``replay/fix.py``): with one, that time is the launch cause's, so the time a cause exposes is the time its
# fix takes away, and the host keeps its gaps.
LAUNCH_BOUND_GROUPS = {**GROUPS, "host": (("idle",), GROUPS["host"][1]),
                        "launch": (("launch_overhead", "cpu"), GROUPS["launch"][1])}
_LAUNCH_BOUND_WORDS = {**_WORDS, "host": "host gaps (time between the CPU ops)",
                       "launch": "the host issuing GPU work (CPU ops and kernel launches)"}


@dataclass(frozen=True, slots=True)
class Cause:
    """One group of the run's time.

    Args:
        name (str): a key of ``GROUPS``.
        exposed_ms (float): its median time on the steady steps' critical paths.
        exposed_pct (float): that, in % of the median steady step.
        saving_ms (float | None): what fixing its findings saves a steady step (median), None without one.
        interval_ms (tuple[float, float] | None): the saving's interval, from the what-if's.
        edits (tuple[str, ...]): the edits that predicted it.
        what (str): the cause in words.
    """

    name: str
    exposed_ms: float
    exposed_pct: float
    saving_ms: float | None = None
    interval_ms: tuple[float, float] | None = None
    edits: tuple[str, ...] = ()
    what: str = ""

    def to_json(self) -> dict[str, object]:
        return {"cause": self.name, "what": self.what, "exposed_ms": self.exposed_ms, "exposed_pct": self.exposed_pct,
                "saving_ms": self.saving_ms, "saving_interval_ms": list(self.interval_ms) if self.interval_ms else None,
                "edits": list(self.edits)}


@dataclass(frozen=True, slots=True)
class RunVerdict:
    """What bounds the run.

    Args:
        verdict (str): ``input-bound``, ``communication-bound``, ``host-bound``, ``launch-bound``, ``gpu-bound``,
            ``untraced`` or ``no-steps``.
        cause (Cause | None): the cause the verdict names (None for gpu-bound and no-steps).
        causes (tuple[Cause, ...]): every group with time, largest saving (then exposure) first.
        steady (tuple[int, ...]): the steady steps; ``set_aside`` the warm-up, outliers and partial steps.
        median_step_ms (float): the median steady step (its slowest rank).
        gpu_busy_pct (float | None): the GPU's busy share of the steady steps' wall; None without GPU work.
        rule (str): the rule, in words.
    """

    verdict: str
    cause: Cause | None
    causes: tuple[Cause, ...]
    steady: tuple[int, ...]
    set_aside: tuple[int, ...]
    median_step_ms: float
    gpu_busy_pct: float | None
    rule: str

    @property
    def gpu_idle_pct(self) -> float | None:
        return None if self.gpu_busy_pct is None else round(100.0 - self.gpu_busy_pct, 1)

    def headline(self) -> str:
        """The verdict in one sentence, with its numbers."""
        gpu = ("no GPU work in the trace (the CPU does the work)" if self.gpu_busy_pct is None
               else f"the GPU is busy {self.gpu_busy_pct:g}% of it (idle {self.gpu_idle_pct:g}%)")
        n = f"{len(self.steady)} steady step(s), median {self.median_step_ms:g} ms"
        if self.verdict == "no-steps":
            return "The run has no complete step to judge."
        if self.verdict == "gpu-bound":
            return f"The run is GPU-bound over {n}: {gpu}, and nothing removable takes {LARGE_PCT:g}% of a step."
        c = self.cause
        assert c is not None
        what = f"{c.what} takes {c.exposed_ms:g} ms ({c.exposed_pct:g}%) of a step's critical path"
        if c.saving_ms is not None:
            lo_hi = f" ({c.interval_ms[0]:g} to {c.interval_ms[1]:g})" if c.interval_ms else ""
            what += f"; removing it saves {c.saving_ms:g} ms{lo_hi} a step ({', '.join(c.edits)})"
        else:
            what += "; no finding names a change that removes it"
        return f"The run is {self.verdict} over {n}: {what}; {gpu}."

    def to_json(self) -> dict[str, object]:
        return {"verdict": self.verdict, "headline": self.headline(),
                "cause": self.cause.to_json() if self.cause else None, "causes": [c.to_json() for c in self.causes],
                "steady_steps": list(self.steady),
                "steady_count": len(self.steady), "set_aside": list(self.set_aside),
                "median_step_ms": self.median_step_ms, "gpu_busy_pct": self.gpu_busy_pct,
                "gpu_idle_pct": self.gpu_idle_pct, "rule": self.rule, "large_pct": LARGE_PCT,
                "gpu_saturated_pct": GPU_SATURATED_PCT}


RULE = (f"GPU-bound only when the GPU is busy >= {GPU_SATURATED_PCT:g}% of the steady steps and no removable cause "
        f"saves >= {LARGE_PCT:g}% of a step; otherwise the cause whose fix saves most (the what-if, median over the "
        f"steady steps), or, with none that large, the largest exposed cause other than GPU work")


def run_verdict(a: Analysis, steady: Steady | None = None) -> RunVerdict:
    """The verdict of ``a``'s run over its steady steps (``analysis.diff.steady_steps``)."""
    s = steady or steady_steps(a)
    set_aside = tuple(sorted(set(s.warmup) | set(s.outliers) | set(s.partial)))
    if not s.steady:
        return RunVerdict("no-steps", None, (), (), set_aside, 0.0, None, RULE)
    by = {(r.step, r.rank): r for r in a.steps}
    reports = [by[(st, s.walls[st][1])] for st in s.steady]
    walls = np.array([r.wall_ns / 1e6 for r in reports])
    median = round(float(np.median(walls)), 3)
    launch_bound = any(f.category == Bottleneck.LAUNCH_OVERHEAD and (f.step is None or f.step in s.steady)
                       for f in a.findings)
    groups, words = (LAUNCH_BOUND_GROUPS, _LAUNCH_BOUND_WORDS) if launch_bound else (GROUPS, _WORDS)
    exposed = _exposed(a, reports, groups)
    busy = _gpu_busy_pct(a, reports)
    causes = []
    for name, ms in exposed.items():
        saving, interval, edits = _capped(*_saving(a, reports, name), ms)
        causes.append(Cause(name, round(ms, 3), round(100 * ms / median, 1) if median else 0.0, saving, interval,
                            edits, words[name]))
    causes.sort(key=lambda c: (-(c.saving_ms or 0.0), -c.exposed_ms, c.name))
    removable = [c for c in causes if c.name != "gpu" and c.saving_ms is not None]
    large = [c for c in removable if 100 * (c.saving_ms or 0.0) / median >= LARGE_PCT] if median else []
    if large:
        cause: Cause | None = large[0]
    elif busy is not None and busy >= GPU_SATURATED_PCT:
        cause = None
    else:
        rest = sorted((c for c in causes if c.name != "gpu" and c.exposed_ms > 0), key=lambda c: -c.exposed_ms)
        cause = rest[0] if rest else None
    if cause is None:
        verdict = "gpu-bound"
    else:
        verdict = "untraced" if cause.name == "untraced" else f"{cause.name}-bound"
    return RunVerdict(verdict, cause, tuple(causes), s.steady, set_aside, median, busy, RULE)


def _exposed(a: Analysis, reports: list, groups: dict[str, tuple[tuple[str, ...], tuple[Bottleneck, ...]]]  # type: ignore[type-arg]
             ) -> dict[str, float]:
    """Median ms of each group on the steady steps' critical paths (the untraced wait out of idle)."""
    rows: list[dict[str, float]] = []
    for r in reports:
        cats = {c.value: v / 1e6 for c, v in r.breakdown_ns.items()}
        cats["untraced_wait"] = untraced_wait_ns(a.graph, r) / 1e6
        cats["idle"] = cats.get("idle", 0.0) - cats["untraced_wait"]
        rows.append({g: sum(cats.get(c, 0.0) for c in cs) for g, (cs, _) in groups.items()})
    return {g: float(np.median([row[g] for row in rows])) for g in groups if any(row[g] > 0 for row in rows)}


def _capped(saving: float | None, interval: tuple[float, float] | None, edits: tuple[str, ...], exposed_ms: float
            ) -> tuple[float | None, tuple[float, float] | None, tuple[str, ...]]:
    """A cause saves at most its time on the path: what a fix frees beyond it (a straggler's fix shortening
    the late rank's own work) is another cause's time."""
    if saving is None or saving <= exposed_ms:
        return saving, interval, edits
    if exposed_ms <= 0.0:
        return None, None, ()
    top = round(exposed_ms, 3)
    return top, (min(interval[0], top), top) if interval else None, edits


def _gpu_busy_pct(a: Analysis, reports: list) -> float | None:  # type: ignore[type-arg]
    row = a.graph.steps.row_of()
    busy = total = 0
    for r in reports:
        i = row.get((r.step, r.rank))
        if i is not None and a.gpu.total_ns[i] > 0:
            busy += int(a.gpu.busy_ns[i])
            total += int(r.wall_ns)
    if not a.gpu_trace.total_ns.size or not total:
        return None
    return round(100.0 * busy / total, 1)


def _own_ranks(a: Analysis, steps: list[int]) -> dict[int, set[int]]:
    """Per steady step, the ranks with a finding of their own time (what can make a rank late)."""
    out: dict[int, set[int]] = defaultdict(set)
    for f in a.findings:
        if f.category in OWN:
            for st in ([f.step] if f.step is not None else steps):
                out[st].update(f.ranks)
    return out


def _saving(a: Analysis, reports: list, name: str  # type: ignore[type-arg]
            ) -> tuple[float | None, tuple[float, float] | None, tuple[str, ...]]:
    """What fixing the group's findings saves a steady step: the median over (up to ``MAX_REPLAYS``) steady
    steps of the replay's saving, a step without such a finding saving nothing; the interval is the one of
    the step whose saving is the median. None when no finding of the group touches a steady step."""
    cats = GROUPS[name][1]
    by_step: dict[int, set[str]] = defaultdict(set)
    steps = sorted({r.step for r in reports})
    own = _own_ranks(a, steps)
    for f in a.findings:
        if f.category in cats and f.category != Bottleneck.SLOW_COMPUTE:
            for st in ([f.step] if f.step is not None else steps):
                # a rank late because of its own stall is that stall's symptom: the stall's fix is the saving
                symptom = f.category == Bottleneck.STRAGGLER_RANK and set(f.ranks) & own.get(st, set())
                if st in steps and not symptom:
                    by_step[st].add(f.category.value)
    if not by_step:
        return None, None, ()
    pick = steps if len(steps) <= MAX_REPLAYS else [steps[i] for i in np.linspace(0, len(steps) - 1, MAX_REPLAYS,
                                                                                   dtype=int)]
    rows: list[tuple[float, tuple[float, float] | None]] = []
    for st in pick:
        if not by_step.get(st):
            rows.append((0.0, None))
            continue
        try:
            p = predict_whatif(a, st, [parse_edit(f"fix {c} step={st}") for c in sorted(by_step[st])])
        except ConfigError:  # a finding the replay cannot take off this step: it saves nothing known
            rows.append((0.0, None))
            continue
        iv = (round(p.baseline_ms - p.interval.hi_ms, 3), round(p.baseline_ms - p.interval.lo_ms, 3)) \
            if p.interval else None
        rows.append((max(p.gain_ms, 0.0), iv))
    rows.sort(key=lambda x: x[0])
    saving, interval = rows[(len(rows) - 1) // 2]
    if saving <= 0.0:  # most steady steps have no such finding, or its fix frees nothing: nothing to remove
        return None, None, ()
    edits = tuple(f"fix {c}" for c in sorted(set().union(*by_step.values())))
    return round(saving, 3), interval, edits
