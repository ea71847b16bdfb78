"""What a trace can and cannot support: one note per limit, for ``oracle analyze`` and the agent.

A question about GPU time needs GPU events, one about a slow step needs steps to compare,
one about a straggler needs every rank: each note names what the trace lacks (or holds that
the analysis treats specially) so that an answer can say so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.analysis.clocks import moved_clocks
from bottleneck_oracle.findings.finding import untraced_matters, untraced_wait
from bottleneck_oracle.traces import UNREAD_CATEGORY, EventKind

__all__ = ["HealthCode", "HealthNote", "trace_health"]

_GPU_WORK = (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)


class HealthCode(StrEnum):
    """The limits a trace can have."""

    NO_GPU = "no_gpu"  # no kernel, copy or fill: nothing about GPU time
    NO_CPU_OPS = "no_cpu_ops"  # GPU work (and runtime calls) only: the host's work is not in the file
    NO_STEPS = "no_steps"  # no ProfilerStep: the whole trace is one step
    ONE_STEP = "one_step"  # a single step per rank: no median to compare it with
    PYTHON_STACKS = "python_stacks"  # with_stack frames: nesting only, never work of their own
    PARTIAL_WORLD = "partial_world"  # fewer files than the world size: cross-rank waits are half seen
    PARTIAL_STEP = "partial_step"  # a last step cut short by the profiler: left out of comparisons
    SKIPPED_EVENTS = "skipped_events"  # malformed events left out
    UNTRACED_WAIT = "untraced_wait"  # GPU work waited for something the trace does not show
    CLOCK_SKEW = "clock_skew"  # ranks recorded on host clocks that disagree: their times were moved onto one


@dataclass(frozen=True, slots=True)
class HealthNote:
    """One limit of a trace: a stable code (for the agent and ``--json``) and a one-line message."""

    code: HealthCode
    message: str


def _steps_note(a: Analysis) -> HealthNote | None:
    steps = a.graph.steps
    if not (steps.step >= 0).any():  # (a --steps-from that matches nothing is refused earlier)
        return HealthNote(HealthCode.NO_STEPS, "no steps (no ProfilerStep annotation): the whole trace is one step "
                          "and no step can be compared with another; --steps-from REGEX makes matching user "
                          "annotations the steps")
    per_rank = np.bincount(steps.rank[steps.step >= 0])
    if per_rank.max() == 1:
        return HealthNote(HealthCode.ONE_STEP, "one step per rank: no other step to compare it with; the verdict "
                          "comes from its critical path and GPU time, not from step-to-step change")
    return None


def _world_note(a: Analysis) -> HealthNote | None:
    ranks = a.graph.trace.ranks
    world = max((i.world_size or 0 for i in ranks), default=0)
    if world <= len(ranks):
        return None
    return HealthNote(HealthCode.PARTIAL_WORLD, f"only {len(ranks)} of {world} ranks: stragglers and waits on the "
                      "missing ranks cannot be seen, and collectives are matched only among the ranks present")


def _skipped_note(a: Analysis) -> HealthNote | None:
    skipped = a.graph.trace.skipped_events
    if not skipped:
        return None
    reasons = ", ".join(f"{r}: {n:,}" for r, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    what = "event(s) malformed or of a category not read" if any(r.startswith(UNREAD_CATEGORY) for r in skipped) \
        else "malformed event(s)"
    return HealthNote(HealthCode.SKIPPED_EVENTS, f"{sum(skipped.values()):,} {what} skipped "
                      f"({reasons}): the analysis does without them")


def _untraced_note(a: Analysis) -> HealthNote | None:
    """GPU work that waited long after its launch, on an idle stream, in a complete step: what it waited
    for is not in the file, so no finding can name it (a window cut from a running server, another
    process on the GPU, an event recorded outside the trace)."""
    g = a.graph
    hits = []
    for r in a.steps:
        if (r.step, r.rank) in a.partial_steps:
            continue
        mask = untraced_wait(g, r)
        wait = int(r.path_dur_ns[mask].sum())
        if untraced_matters(wait, r.wall_ns):
            longest = int(np.flatnonzero(mask)[np.argmax(r.path_dur_ns[mask])])
            hits.append((wait / r.wall_ns, wait, r, longest))
    if not hits:
        return None
    share, wait, r, i = max(hits, key=lambda h: h[0])
    node = int(r.path_node[i])
    name = g.node_name(node)
    where = f"step {r.step}" if r.step >= 0 else "the trace"
    more = f"; {len(hits)} steps in all" if len(hits) > 1 else ""
    return HealthNote(HealthCode.UNTRACED_WAIT, (
        f"on rank {r.rank}, GPU work waited {wait / 1e6:.3f} ms ({share:.1%} of {where}) after its launch, "
        f"on an idle stream, for something the trace does not show (work launched before the profiler started, "
        f"another process, or an event recorded outside the trace); the longest wait: "
        f"'{name if len(name) <= 60 else name[:59] + '…'}' on {g.trace.lanes.label[g.lane[node]]}, "
        f"{r.path_dur_ns[i] / 1e6:.3f} ms{more}. It is idle on the critical path, and no finding can name "
        f"what it waited for"))


def _clock_note(a: Analysis) -> HealthNote | None:
    if a.clocks is None or not a.clocks.any():
        return None
    return HealthNote(HealthCode.CLOCK_SKEW, (
        f"host clocks disagree: {moved_clocks(a.clocks)}. The ranks were moved onto the clock named before the "
        "analysis, since the members of a collective end together; file times (ts_us) are still the files' own"))


def trace_health(a: Analysis) -> list[HealthNote]:
    """The limits of the trace behind ``a``, most fundamental first; empty for a trace that has it all.

    Args:
        a (Analysis): the analysis of the trace.

    Returns:
        list[HealthNote]: one note per limit, at most one per code.
    """
    kind = a.graph.trace.events.kind
    notes: list[HealthNote | None] = []
    if not np.isin(kind, _GPU_WORK).any():
        notes.append(HealthNote(HealthCode.NO_GPU, "no GPU events: GPU time, launches, copies and syncs cannot be "
                                "measured; only host time is analysed"))
    elif not np.isin(kind, (EventKind.CPU_OP, EventKind.ANNOTATION)).any():
        notes.append(HealthNote(HealthCode.NO_CPU_OPS, "no CPU ops: GPU work (and runtime calls) only; what the host "
                                "did between launches, and any step range, cannot be seen"))
    notes.append(_steps_note(a))
    if frames := int((kind == EventKind.PYTHON).sum()):
        notes.append(HealthNote(HealthCode.PYTHON_STACKS, f"Python stacks present ({frames:,} frames, with_stack): "
                                "they are nesting only, never work of their own on the critical path"))
    notes.append(_world_note(a))
    notes.append(_clock_note(a))
    if a.partial_steps:
        cut = ", ".join(f"step {s} on rank {r}" for s, r in sorted(a.partial_steps))
        notes.append(HealthNote(HealthCode.PARTIAL_STEP, f"partial last step ({cut}): under half its rank's median "
                                "step, as when the profiler stops mid-step; left out of medians and findings"))
    notes.append(_untraced_note(a))
    notes.append(_skipped_note(a))
    return [n for n in notes if n is not None]
