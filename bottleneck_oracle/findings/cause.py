"""The cause of a step, across ranks: the one rule that ``analyze``, the agent, ``optimize`` and the evals
share for "why is step N slow?".

A step is as slow as its slowest rank, but that rank is often only waiting: inside a collective that
another rank reached late. The rule follows the wait to the rank that made it:

- a rank that reached the step's collectives late, while the others waited inside, is the explaining
  rank; what delayed it is the cause: its own finding of the step (a host pause, a data-loading stall,
  slow compute...) or, where no detector named it (a one-step trace has no peers to compare with),
  what its critical path ran in the window the others waited (idle host: a host pause; data loading;
  blocking syncs; else a straggler);
- otherwise the step's largest finding, but a wait (a pipeline bubble, exposed communication) gives way
  to a stall of the step at least half its size, which it waited for; a collective every rank waits in
  is exposed communication, on the rank that waited longest, the others' waits beside it.

The cause is one of the findings (marked ``cause``), with the ranks that waited for it and how long
(``waiting``, ``waited_ms``); a cause no detector found is added to the findings.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from bottleneck_oracle.graph.collectives import CollectiveArrival
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.detectors import neighbour_op
from bottleneck_oracle.findings.finding import CAT_INDEX, MAJOR, MIN_NS, Finding, ms, top_ops
from bottleneck_oracle.graph.path_nodes import PathNodes
from bottleneck_oracle.findings.severity import bound_findings
from bottleneck_oracle.graph.types import Bottleneck, Category

__all__ = ["LATE_SHARE", "OWN", "STALL_SHARE", "Late", "late_ranks", "with_causes"]

LATE_SHARE = 0.10  # of the step's wall: how long the others must wait for a late rank to make it the cause
# what a late rank's critical path ran while the others waited, as the cause it names
_WINDOW_CAUSE = {Category.IDLE: Bottleneck.HOST_PAUSE, Category.DATA_LOADING: Bottleneck.DATALOADER_STALL,
                 Category.SYNC_WAIT: Bottleneck.HOST_SYNC}
# findings of a rank's own time: what can make it late (a straggler finding is the lateness itself)
OWN = (Bottleneck.HOST_PAUSE, Bottleneck.DATALOADER_STALL, Bottleneck.SLOW_COMPUTE, Bottleneck.CHECKPOINT_STALL,
        Bottleneck.HOST_SYNC, Bottleneck.LAUNCH_OVERHEAD)
# the late rank's own largest finding leads to what made it late, the lateness itself (its straggler
# finding, often the larger by the waits it caps) included
_LATE = (*OWN, Bottleneck.STRAGGLER_RANK)
# waits: a GPU idle for a pipeline neighbour, a collective not hidden; a stall of the step at least
# STALL_SHARE as large is what they waited for (every stage's loader stalled: the next stage's GPU idles)
_WAITS = (Bottleneck.PIPELINE_BUBBLE, Bottleneck.EXPOSED_COMMUNICATION)
STALL_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Late:
    """A rank the others waited for in a step's collectives.

    Args:
        step (int): the step.
        rank (int): the late rank.
        waited_ns (dict[int, int]): per waiting rank, its longest wait inside one of them (collectives
            in flight together, as DDP buckets are, are waited for at once, not once each).
        op (int): node of its member in the collective with the longest wait; ``arrived_ns``: when it got there.
    """

    step: int
    rank: int
    waited_ns: dict[int, int]
    op: int
    arrived_ns: int

    @property
    def longest_ns(self) -> int:
        """The longest wait it caused."""
        return max(self.waited_ns.values(), default=0)


def late_ranks(arrivals: list[CollectiveArrival]) -> dict[int, list[Late]]:
    """Per step, every rank that reached one of its collectives (``arrivals``: ``collective_arrivals``) after
    another member, by more than it had waited itself, longest wait first (pipeline send/recv pairs left out:
    a receive is posted early by design)."""
    waits: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
    worst: dict[tuple[int, int], tuple[int, int, int]] = {}
    for c in arrivals:
        if (c.kind == "sendrecv" and len(c.ranks) == 2) or c.own_ns < c.lateness_ns / 2:
            continue  # late by what it waited for itself: the wait is the other rank's doing
        arrive, key = c.arrived_ns, (c.step, c.last_rank)
        for start, rank in zip(c.starts, c.ranks):
            wait = arrive - start
            if rank != c.last_rank and wait > 0:
                waits[key][rank] = max(waits[key].get(rank, 0), wait)
                if wait > worst.get(key, (0, -1, 0))[0]:
                    worst[key] = (wait, c.last_node, arrive)
    out: dict[int, list[Late]] = defaultdict(list)
    for (step, rank), waited in waits.items():
        out[step].append(Late(step, rank, waited, *worst[(step, rank)][1:]))
    for lates in out.values():
        lates.sort(key=lambda x: -x.longest_ns)
    return out


def with_causes(path_nodes: PathNodes, lates: dict[int, list[Late]], reports: list[StepReport],
                findings: list[Finding], steps: set[int]) -> list[Finding]:
    """``findings`` with the cause of each step of ``steps`` marked (``cause``, with ``waiting`` and
    ``waited_ms``) and moved ahead of its step's other findings, a cause no detector found added.

    Args:
        path_nodes: the nodes of the paths of ``reports``, and the members of collectives.
        lates: ``late_ranks``.
        reports: the complete steps.
        steps: the steps to explain (the slow ones, or every step of a trace too short to compare).
    """
    out = list(findings)
    by_step: dict[int, list[StepReport]] = defaultdict(list)
    for r in reports:
        by_step[r.step].append(r)
    for step in sorted(steps & by_step.keys()):
        _mark(path_nodes, out, by_step[step], step, lates.get(step, []), reports)
    return _causes_first(out)


def _causes_first(findings: list[Finding]) -> list[Finding]:
    """``findings`` in their order, but each step's cause moved ahead of the other findings of its
    step: it explains them (the waits it made are often as large, and on more ranks)."""
    out = list(findings)
    for cause in [f for f in findings if f.cause]:
        first = next(i for i, f in enumerate(out) if f.step == cause.step and f.severity == cause.severity)
        out.remove(cause)
        out.insert(first, cause)
    return out


def _mark(path_nodes: PathNodes, out: list[Finding], reports: list[StepReport], step: int, lates: list[Late],
          all_reports: list[StepReport]) -> None:
    """Marks (or adds) the cause of ``step`` in ``out``."""
    wall = max(r.wall_ns for r in reports)
    late = next((x for x in lates if x.longest_ns >= max(MIN_NS, LATE_SHARE * wall)), None)
    mine = [i for i, f in enumerate(out) if f.step == step and f.severity == MAJOR]
    waited = late.waited_ns if late else {}

    def weight(f: Finding) -> float:
        # a waiting rank's exposed communication is the late rank's doing, not a cause of its own
        if f.category == Bottleneck.EXPOSED_COMMUNICATION:
            return f.impact_ms - ms(max(waited.get(r, 0) for r in f.ranks))
        return f.impact_ms

    best = max(mine, key=lambda i: weight(out[i]), default=None)
    stall = max((i for i in mine if out[i].category in OWN), key=lambda i: out[i].impact_ms, default=None)
    if best is not None and stall is not None and out[best].category in _WAITS \
            and out[stall].impact_ms >= STALL_SHARE * weight(out[best]):
        best = stall
    if late is not None and (best is None or ms(late.longest_ns) >= weight(out[best])
                             or (late.rank in out[best].ranks and out[best].category in _LATE)):
        i = _late_cause(path_nodes, out, reports, step, late, all_reports)
        out[i] = replace(out[i], cause=True, waiting=tuple(sorted(waited)),
                         waited_ms=tuple(ms(waited[w]) for w in sorted(waited)))
        return
    if best is None:
        return
    f = out[best]
    if f.category == Bottleneck.EXPOSED_COMMUNICATION:  # every rank waits in it: the others beside it
        others = {o.ranks[0]: o.impact_ms for o in out if o.step == step and o.category == f.category
                  and o.ranks != f.ranks and len(o.ranks) == 1}
        out[best] = replace(f, cause=True, waiting=tuple(sorted(others)),
                            waited_ms=tuple(others[r] for r in sorted(others)))
    else:
        out[best] = replace(f, cause=True)


def _late_cause(path_nodes: PathNodes, out: list[Finding], reports: list[StepReport], step: int, late: Late,
                all_reports: list[StepReport]) -> int:
    """Index in ``out`` of what made ``late.rank`` late: its own finding of the step, else a finding
    made from what its critical path ran while the others waited (appended)."""
    own = [i for i, f in enumerate(out) if f.step == step and f.ranks[:1] == (late.rank,) and f.category in OWN]
    if own:
        return max(own, key=lambda i: out[i].impact_ms)
    report = next((r for r in reports if r.rank == late.rank), None)
    category, ops, what = _window(path_nodes, report, late) if report is not None else (Bottleneck.STRAGGLER_RANK, (), "")
    straggler = [i for i, f in enumerate(out) if f.step == step and f.ranks == (late.rank,)
                 and f.category == Bottleneck.STRAGGLER_RANK]
    if category == Bottleneck.STRAGGLER_RANK and straggler:
        return straggler[0]
    waiting = ", ".join(f"{w} ({ms(n)} ms)" for w, n in sorted(late.waited_ns.items()))
    found = Finding(
        category, step, (late.rank,), ops or (path_nodes.node_name(late.op),), ms(late.longest_ns),
        f"rank {late.rank} reached {path_nodes.node_name(late.op)} of step {step} late; rank(s) {waiting} waited "
        f"inside" + (f"; before arriving, rank {late.rank} {what}" if what else ""),
        waiting=tuple(sorted(late.waited_ns)),
    )
    out.append(next(iter(bound_findings([found], all_reports)), found))  # no more than the step lost
    return len(out) - 1


def _window(path_nodes: PathNodes, r: StepReport, late: Late) -> tuple[Bottleneck, tuple[str, ...], str]:
    """What held ``r``'s rank back before it reached the collective the others waited longest in: the
    largest of its critical path's idle, data-loading and blocking-sync time on its own rank before
    it arrived, when that is at least half the wait; else it was simply slower (a straggler). Returns
    the cause it names, its ops and a phrase saying it."""
    arrived = late.arrived_ns
    seg_hi = np.minimum(r.path_start_ns + r.path_dur_ns, arrived)
    before = np.flatnonzero((seg_hi > r.path_start_ns) & (r.path_rank == r.rank))
    held = before[np.isin(r.path_category[before], [CAT_INDEX[c] for c in _WINDOW_CAUSE])]
    spent = np.bincount(r.path_category[held], weights=seg_hi[held] - r.path_start_ns[held], minlength=len(CAT_INDEX))
    top = int(np.argmax(spent))
    if not len(held) or spent[top] < 0.5 * late.longest_ns:
        return Bottleneck.STRAGGLER_RANK, (), ""
    category = next(c for c, i in CAT_INDEX.items() if i == top)
    mine = held[r.path_category[held] == top]
    if category == Category.IDLE:
        i = int(mine[np.argmax(r.path_dur_ns[mine])])
        ops = tuple(x for x in (neighbour_op(path_nodes, r, i, -1), neighbour_op(path_nodes, r, i, +1)) if x)
    else:
        ops = top_ops(path_nodes, r, np.isin(np.arange(len(r.path_node)), mine))
    return _WINDOW_CAUSE[category], ops, f"spent {ms(spent[top])} ms in {category.value} on its critical path"
