"""A scan: a job of any size read one rank at a time, no process holding more than one rank's events.

Each rank's file is read where the executor runs its task (a local process, or a Ray worker) and reduced
to a summary (``job/summary.py``); the summaries are joined here: the collectives matched across ranks,
the clocks put in step, then each step's wall time on every rank, its critical path through the ranks and
the breakdown of its wall time (stitched from each rank's chains, ``job/job_paths.py``), the slow steps, the
GPU timeline and the ranks that reached collectives late; with the paths, a last round runs every detector on
each rank's graph with its steps' paths and joins their findings with each slow step's cause
(``job/scan_findings.py``); with edits, it reduces each rank's edited point graph to its boundary and the driver
replays the job from those (``replay/rank_replay.py``); rounds asked for after its own run on the kept traces (the
graph model's, ``gnn/scan_model.py``). Every number equals ``analyze``'s on the whole trace. The edits that read
the job's whole graph (``fix``, the structural ones) are ``analyze``'s alone.

A file is parsed once: between the rounds its trace waits on the node that read it, and its next task is sent
there. The driver holds the summaries only: each rank's members and chains, then its steps' paths.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bottleneck_oracle.analysis.clocks import ClockEstimate, MemberTimes, offsets_of, symmetric_kinds
from bottleneck_oracle.graph.collectives import CollectiveArrival, arrivals_of
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.detectors import straggler_findings
from bottleneck_oracle.findings.finding import MAJOR, Finding
from bottleneck_oracle.findings.findings import strongest
from bottleneck_oracle.findings.gpu_bound import GpuBound
from bottleneck_oracle.graph.gpu_timeline import FIELDS, GpuTimeline
from bottleneck_oracle.graph.graph import CollectiveTable
from bottleneck_oracle.graph.job_collectives import JobCollectives
from bottleneck_oracle.job.job_paths import JobPaths, PlacedPaths
from bottleneck_oracle.graph.path_nodes import p2p_peers
from bottleneck_oracle.replay.rank_replay import ScanWhatIf, check_node_edits, scan_whatif
from bottleneck_oracle.job.scan_findings import RankPathsOf, for_rank, job_findings
from bottleneck_oracle.job.scan_rounds import KeptJob, Progress, Stopwatch, keys_task, last_task, mapped, summary_task
from bottleneck_oracle.findings.severity import bound_findings
from bottleneck_oracle.findings.slow_steps import SlowStep, find_slow_steps, partial_steps
from bottleneck_oracle.job.summary import (
    JobFrame,
    NodeNames,
    RankSummary,
    match_job,
)
from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.executor import Executor
from bottleneck_oracle.traces import check_ranks, one_rank, trace_files
from bottleneck_oracle.truth.edits import Edit

__all__ = ["Scan", "scan"]

_NONE = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Scan:
    """What a scan found.

    Args:
        ranks (tuple[int, ...]): the ranks read, in order; ``events``: their events in all.
        steps (tuple[StepReport, ...]): one per (step, rank) with work, by step then rank, as ``analyze``'s:
            window, wall time, breakdown and critical path through the ranks (its points are not given:
            ``start_point`` and ``end_point`` are -1).
        partial_steps (frozenset[tuple[int, int]]): (step, rank) cut short by the profiler.
        slow_steps (tuple[SlowStep, ...]): slowest first.
        stragglers (tuple[Finding, ...]): ranks that reached collectives late, impact capped by what their
            step lost (``findings/severity.py``), largest first.
        findings (tuple[Finding, ...]): every detector's, with each slow step's cause, as ``analyze``'s (none
            without the paths).
        gpu_bound (tuple[GpuBound, ...]): the GPU-bound steps, as ``analyze --json`` gives them (none without
            the paths).
        arrivals (tuple[CollectiveArrival, ...]): who reached each reliable instance last, and by how much.
        collectives (CollectiveTable): every instance matched.
        gpu (GpuTimeline): what the GPU did in each step, one row per (step, rank) of ``gpu_steps``.
        gpu_steps (tuple[tuple[int, int], ...]): (step, rank) of each row of ``gpu``.
        gpu_trace (GpuTimeline): over the trace, one row per rank with GPU work.
        clocks (ClockEstimate | None): each rank's clock offset, as ``analyze`` reads it; None: not read.
        summary_bytes (tuple[int, ...]): per rank, the bytes of its summaries (pickled), the driver's share.
        task_peak_bytes (tuple[int, ...]): per rank, the peak memory of the process that summarised it.
        seconds (dict[str, float]): the time of each stage: ``map`` (the tasks of every round), ``reduce`` (the
            matching and the cross-rank stage, in this process).
        names (NodeNames): the name of every node on a step's critical path, and of every member.
        whatif (ScanWhatIf | None): every step's wall time on every rank under the edits asked for (None: none).
        then (object): what the rounds asked to run after the scan's own gave (``scan(then=...)``; None: none).
    """

    ranks: tuple[int, ...]
    events: int
    steps: tuple[StepReport, ...]
    partial_steps: frozenset[tuple[int, int]]
    slow_steps: tuple[SlowStep, ...]
    stragglers: tuple[Finding, ...]
    findings: tuple[Finding, ...]
    gpu_bound: tuple[GpuBound, ...]
    arrivals: tuple[CollectiveArrival, ...]
    collectives: CollectiveTable
    gpu: GpuTimeline
    gpu_steps: tuple[tuple[int, int], ...]
    gpu_trace: GpuTimeline
    clocks: ClockEstimate | None
    summary_bytes: tuple[int, ...]
    task_peak_bytes: tuple[int, ...]
    seconds: dict[str, float]
    names: NodeNames
    whatif: ScanWhatIf | None = None
    then: object = None


Then = Callable[[KeptJob, Scan], object]  # rounds run after the scan's own, on the ranks' kept traces


def scan(paths: Sequence[Path], executor: Executor, *, partial: bool = False, steps_from: str | None = None,
         critical_paths: bool = True, align_clocks: bool = True, edits: Sequence[Edit] = (),
         progress: Progress | None = None, then: Then | None = None) -> Scan:
    """Scans the job in ``paths`` (files or folders, one file per rank), one task per rank file on ``executor``.

    Args:
        critical_paths (bool): stitch each step's critical path and breakdown from the ranks' chains (the
            driver then holds each rank's chains, tens of bytes per event; without, its members only).
        edits (Sequence[Edit]): node edits (``scale``, ``remove``, ``set``) to replay: every step's wall time
            under them (``Scan.whatif``).
        then: more rounds, given the ranks' kept traces and what the scan found (the graph model's,
            ``gnn/scan_model.py``); what they give is ``Scan.then``.

    Between the rounds, each rank's parsed trace waits in the temporary folder of the node that read it
    (``tempfile.gettempdir()``), and its next task is sent there; the folder is removed at the end.

    Raises:
        TraceFormatError: as ``read_trace``: a file unreadable or not a trace, no usable event, two files
            claiming one rank, ranks missing (unless ``partial``).
        ConfigError: an edit that is not a node edit, or whose selector picks no node of the job.
    """
    check_node_edits(edits)
    spill = Path(tempfile.gettempdir()) / f"oracle-scan-{uuid.uuid4().hex}"
    try:
        return _scan(trace_files(paths), executor, spill, partial, (steps_from, critical_paths, tuple(edits)),
                     align_clocks, progress, then)
    finally:
        shutil.rmtree(spill, ignore_errors=True)  # this node's; a cluster's other nodes' are taken by round 2


def _scan(files: list[tuple[Path, bool]], executor: Executor, spill: Path, partial: bool,
          how: tuple[str | None, bool, tuple[Edit, ...]], align_clocks: bool, progress: Progress | None,
          then: Then | None) -> Scan:
    steps_from, paths, edits = how
    last = paths or bool(edits)  # a last round follows round 2
    items = [(p, named, spill / f"{i}.trace") for i, (p, named) in enumerate(files)]
    clock = Stopwatch()
    peak: dict[Path, int] = defaultdict(int)  # per rank (its spill's name), the peak of its tasks
    with clock("map"):
        read = mapped(executor, keys_task, items, "reading", progress, peak)
    where = dict(zip((i[2] for i in items), executor.stats.node or [""] * len(items)))
    found = [(r, item) for r, item in zip(read, items) if r is not None]
    check_ranks(one_rank([(rank, path, world) for (rank, path, world, _), _ in found]), partial)
    ranked = sorted(((r, item) for r, item in found if r[3] is not None), key=lambda x: x[0][3].rank)
    if not ranked:
        raise TraceFormatError(f"{files[0][0].name}: no usable events in any rank file")
    keys = [r[3] for r, _ in ranked]
    rank_items = [item for _, item in ranked]
    near = [where[item[2]] for item in rank_items]
    frame = JobFrame.of(keys)
    summarised = (steps_from, paths, not last and then is None)  # the trace is taken by the last round
    with clock("reduce"):
        jobs, table = match_job(keys, frame)
    with clock("map"):
        summaries = _summaries(executor, rank_items, jobs, summarised, near, "summarising", progress, peak)
    with clock("reduce"):
        n_ranks = max(k.rank for k in keys) + 1
        clocks = offsets_of(_member_times(summaries, table, frame), n_ranks) if align_clocks else None
    if clocks is not None and clocks.any():  # the members again, with the ranks' clocks in step
        frame = JobFrame.of(keys, clocks.offset_ns)
        with clock("reduce"):
            jobs, table = match_job(keys, frame)
        with clock("map"):
            summaries = _summaries(executor, rank_items, jobs, summarised, near, "summarising on one clock", progress,
                                   peak)
    settled, again = _settled(summaries, jobs, table, frame) if last else ([], [])
    if again and paths:  # ranks whose instances' first ends other ranks moved: their chains again, with the moved ends
        with clock("map"):
            redone = _summaries(executor, [rank_items[i] for i in again], [settled[i] for i in again], summarised,
                                [near[i] for i in again], "summarising with the settled ends", progress, peak)
        for i, s in zip(again, redone):
            summaries[i] = s
    for i in again:
        jobs[i] = settled[i]
    sizes = tuple(len(pickle.dumps(k)) + len(pickle.dumps(s)) for k, s in zip(keys, summaries))
    # each rank's first node: the job's graph numbers each rank's nodes after the lower ranks'
    base = np.cumsum([0] + [s.nodes for s in summaries])[:-1].tolist()
    with clock("reduce"):
        out, raw_stragglers = _joined(summaries, base, table, frame, clocks, sizes)
    if last:
        with clock("reduce"):
            complete = [r for r in out.steps if (r.step, r.rank) not in out.partial_steps]
            given = _given(summaries, base, frame, out, complete, table) if paths else [None] * len(summaries)
        with clock("map"):
            done = mapped(executor, last_task, [(*item, job, steps_from, g, edits, then is None) for item, job, g in
                                                zip(rank_items, jobs, given)],
                          "finding bottlenecks" if paths else "replaying the edits", progress, peak, near)
        with clock("reduce"):
            if paths:
                found = [f for f, _ in done]
                by_rank = {s.rank: f for s, f in zip(summaries, found)}
                findings = job_findings(by_rank, raw_stragglers, complete, list(out.slow_steps), out.gpu,
                                        out.gpu_steps, list(out.arrivals), out.names)
                out = replace(out, findings=tuple(findings), gpu_bound=tuple(b for f in found for b in f.gpu_bound))
            if edits:
                out = replace(out, whatif=scan_whatif(edits, [r for _, r in done], frame.shift_ns, len(table.kind)))
    if then is not None:
        kept = KeptJob(executor, rank_items, jobs, near, steps_from, summaries, base, frame.shift_ns, progress, peak)
        with clock("then"):
            out = replace(out, then=then(kept, out))
    return replace(out, task_peak_bytes=tuple(peak[item[2]] for item in rank_items), seconds=dict(clock.seconds))


def _given(summaries: list[RankSummary], base: list[int], frame: JobFrame, out: Scan, complete: list[StepReport],
           table: CollectiveTable) -> list[RankPathsOf]:
    """Each rank's findings task's input: its complete steps' paths."""
    of_rank: dict[int, list[StepReport]] = defaultdict(list)
    for r in complete:
        of_rank[r.rank].append(r)
    peers = p2p_peers(np.concatenate([s.instance for s in summaries]),
                      np.concatenate([np.full(len(s.instance), s.rank) for s in summaries]), table)
    slow = frozenset(x.step for x in out.slow_steps)
    return [for_rank(s, b, frame.shift_ns[s.rank], of_rank[s.rank], out.names, slow, peers)
            for s, b in zip(summaries, base)]


def _summaries(executor: Executor, items: list[tuple[Path, bool, Path]], jobs: list[JobCollectives],
               how: tuple[str | None, bool, bool], near: list[str], what: str, progress: Progress | None,
               peak: dict[Path, int]) -> list[RankSummary]:
    """Round 2 (``how``: the steps' regex, with the paths, and whether it is the last round)."""
    return mapped(executor, summary_task, [(*item, job, *how) for item, job in zip(items, jobs)], what,
                  progress, peak, near)


def _settled(summaries: list[RankSummary], jobs: list[JobCollectives], table: CollectiveTable, frame: JobFrame
             ) -> tuple[list[JobCollectives], list[int]]:
    """Each rank's collectives with the ends the job's graph has once every rank's gloo ops ended where their
    threads resumed (its instances' first ends, the ends of sends to it), and the ranks whose chains were
    built on other ends."""
    first_end = np.full(len(table.kind), np.iinfo(np.int64).max, dtype=np.int64)
    for s in summaries:
        np.minimum.at(first_end, s.instance, s.member_end + frame.shift_ns[s.rank])
    of_rank = {s.rank: s for s in summaries}
    out, again = [], []
    for i, (s, job) in enumerate(zip(summaries, jobs)):
        shift = frame.shift_ns[s.rank]
        ends = first_end[job.instance] - shift
        settled = replace(job, settled_end=ends, sends=replace(job.sends, end_ns=np.array(
            [_member_end(of_rank[r], n) + frame.shift_ns[r] - shift for r, n in zip(job.sends.rank.tolist(),
                                                                                 job.sends.node.tolist())], np.int64)))
        used = job.settled_end if job.settled_end is not None else job.first_end
        mine = table.reliable[job.instance]
        if (not np.array_equal(ends[mine], used[mine])
                or not np.array_equal(settled.sends.end_ns, job.sends.end_ns)):
            again.append(i)
        out.append(settled)
    return out, again


def _member_end(s: RankSummary, node: int) -> int:
    return int(s.member_end[np.searchsorted(s.member, node)])


def _member_times(summaries: list[RankSummary], table: CollectiveTable, frame: JobFrame) -> MemberTimes:
    """Every member of the job, in the job's node order (ranks in order, each in its own)."""
    instance = np.concatenate([s.instance for s in summaries])
    return MemberTimes(
        instance=instance,
        rank=np.concatenate([np.full(len(s.member), s.rank, dtype=np.int64) for s in summaries]),
        start=np.concatenate([s.member_start + frame.shift_ns[s.rank] for s in summaries]),
        end=np.concatenate([s.member_end + frame.shift_ns[s.rank] for s in summaries]),
        symmetric=symmetric_kinds(table.kind)[instance], transfer=np.concatenate([s.transfer for s in summaries]),
    )


def _joined(summaries: list[RankSummary], base: list[int], table: CollectiveTable, frame: JobFrame,
            clocks: ClockEstimate | None, sizes: tuple[int, ...]) -> tuple[Scan, list[Finding]]:
    """The cross-rank stage, over the summaries only (``base``: each rank's first node in the job's graph); and
    the stragglers before they are capped."""
    names = NodeNames(summaries, base, table)
    member, inst, start, rank, step = [], [], [], [], []
    for s, b in zip(summaries, base):
        keep = table.reliable[s.instance] if len(s.instance) else np.zeros(0, dtype=bool)
        member.append(s.member[keep] + b)
        inst.append(s.instance[keep])
        start.append(s.member_start[keep] + frame.shift_ns[s.rank])
        rank.append(np.full(int(keep.sum()), s.rank, dtype=np.int64))
        step.append(s.member_step[keep])
    arrivals = arrivals_of(*(np.concatenate(c) if c else _NONE for c in (member, inst, start, rank, step)), table.kind)
    reports = _reports(summaries, base, frame)
    partial = partial_steps(reports)
    complete = [r for r in reports if (r.step, r.rank) not in partial]
    slow = find_slow_steps(reports)
    raw = straggler_findings(arrivals, complete, {s.step for s in slow}, names)
    stragglers = sorted(strongest(bound_findings(raw, complete)), key=lambda f: (f.severity != MAJOR, -f.impact_ms))
    gpu_steps = tuple((int(st), s.rank) for s in summaries for st in s.step.tolist())
    return Scan(
        ranks=tuple(s.rank for s in summaries), events=sum(s.events for s in summaries), steps=tuple(reports),
        partial_steps=frozenset(partial), slow_steps=tuple(slow), stragglers=tuple(stragglers), findings=(),
        gpu_bound=(), arrivals=tuple(arrivals), collectives=table, gpu=_concat([s.gpu for s in summaries]), gpu_steps=gpu_steps,
        gpu_trace=_concat([s.gpu_trace for s in summaries]), clocks=clocks, summary_bytes=sizes,
        task_peak_bytes=(), seconds={}, names=names,
    ), raw


def _reports(summaries: list[RankSummary], base: list[int], frame: JobFrame) -> list[StepReport]:
    """The steps with work, by step then rank, as ``find_critical_paths`` orders them, with their critical
    paths stitched from every rank's chains (``base``: the first node of each rank in the job's graph)."""
    chains = [PlacedPaths(s.rank, b, frame.shift_ns[s.rank], s.paths) for s, b in zip(summaries, base) if s.paths]
    paths = JobPaths(chains) if len(chains) == len(summaries) else None
    out = []
    for s in summaries:
        shift = frame.shift_ns[s.rank]
        for row in np.flatnonzero(s.last_node >= 0).tolist():
            r = StepReport(
                step=int(s.step[row]), rank=s.rank, start_ns=int(s.start_ns[row]) + shift,
                end_ns=int(s.end_ns[row]) + shift, breakdown_ns={}, path_node=_NONE, path_category=_NONE,
                path_rank=_NONE, path_start_ns=_NONE, path_dur_ns=_NONE, start_point=-1, end_point=-1,
            )
            out.append(paths.report(r, row) if paths is not None else r)
    return sorted(out, key=lambda r: (r.step, r.rank))


def _concat(parts: list[GpuTimeline]) -> GpuTimeline:
    return GpuTimeline(rank=np.concatenate([p.rank for p in parts]),
                       **{f"{f}_ns": np.concatenate([getattr(p, f"{f}_ns") for p in parts]) for f in FIELDS})

