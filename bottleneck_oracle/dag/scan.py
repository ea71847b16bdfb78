"""A scan: a job of any size read one rank at a time, no process holding more than one rank's events.

Each rank's file is read where the executor runs its task (a local process, or a Ray worker) and reduced
to a summary (``dag/summary.py``); the summaries are joined here: the collectives matched across ranks,
the clocks put in step, then each step's wall time on every rank, its critical path through the ranks and
the breakdown of its wall time (stitched from each rank's chains, ``dag/job_paths.py``), the slow steps, the
GPU timeline and the ranks that reached collectives late; with the paths, a last round runs every detector on
each rank's graph with its steps' paths and joins their findings with each slow step's cause
(``dag/scan_findings.py``). Every number equals ``analyze``'s on the whole trace. What-if and the graph model
read the job's whole graph: they are ``analyze``'s alone.

A file is parsed once: between the rounds its trace waits on the node that read it, and its next task is sent
there. The driver holds the summaries only: each rank's members and chains, then its steps' paths.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bottleneck_oracle.dag.clocks import ClockEstimate, MemberTimes, offsets_of, symmetric_kinds
from bottleneck_oracle.dag.collectives import CollectiveArrival, arrivals_of
from bottleneck_oracle.dag.critical_path import StepReport
from bottleneck_oracle.dag.detectors import straggler_findings
from bottleneck_oracle.dag.finding import MAJOR, Finding
from bottleneck_oracle.dag.findings import strongest
from bottleneck_oracle.dag.gpu_bound import GpuBound
from bottleneck_oracle.dag.gpu_timeline import FIELDS, GpuTimeline
from bottleneck_oracle.dag.graph import CollectiveTable
from bottleneck_oracle.dag.job_collectives import JobCollectives
from bottleneck_oracle.dag.job_paths import JobPaths, PlacedPaths
from bottleneck_oracle.dag.path_nodes import p2p_peers
from bottleneck_oracle.dag.scan_findings import RankFindings, RankPathsOf, findings_of_rank, for_rank, job_findings
from bottleneck_oracle.dag.severity import bound_findings
from bottleneck_oracle.dag.slow_steps import SlowStep, find_slow_steps, partial_steps
from bottleneck_oracle.dag.summary import (
    JobFrame, NodeNames, RankKeys, RankSummary, match_job, rank_keys, rank_summary,
)
from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.executor import Executor
from bottleneck_oracle.traces import Trace, check_ranks, one_rank, read_rank, trace_files

__all__ = ["Scan", "scan"]

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]  # (round, ranks done, ranks)
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
            step lost (``dag/severity.py``), largest first.
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


def _keys_task(item: tuple[Path, bool, Path]) -> tuple[int, Path, int | None, RankKeys | None] | None:
    """Round 1 of one file; its trace is left at ``spill`` (the third of ``item``) for round 2 on this node."""
    path, named, spill = item
    read = read_rank(path, named)
    if read is None:
        return None
    rank, path, world, trace = read
    if trace is None:
        return rank, path, world, None
    part = spill.with_suffix(".part")
    try:
        spill.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(pickle.dumps(trace, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(part, spill)  # whole or absent: a task killed while writing leaves no half trace to read
    except OSError as e:  # a full or read-only temporary folder: round 2 reads the file again
        with suppress(OSError):
            part.unlink()
        log.info("%s: not kept for round 2 (%s)", path.name, e)
    return rank, path, world, rank_keys(trace)


def _summary_task(item: tuple[Path, bool, Path, JobCollectives, str | None, bool]) -> RankSummary:
    """Round 2 of one file (kept for the findings' round with the paths, else taken: the last round takes it)."""
    path, named, spill, job, steps_from, paths = item
    return rank_summary(_kept(path, named, spill, take=not paths), job, steps_from, paths)


def _findings_task(item: tuple[Path, bool, Path, JobCollectives, str | None, RankPathsOf]) -> RankFindings:
    """The last round of one file: its detectors on its steps' paths."""
    path, named, spill, job, steps_from, given = item
    return findings_of_rank(_kept(path, named, spill, take=True), job, steps_from, given)


def _kept(path: Path, named: bool, spill: Path, take: bool) -> Trace:
    """The trace round 1 left on this node (``take``: removed, the last round's), else the file read again (the
    task ran on another node, or round 1 could not keep it)."""
    try:
        trace: Trace = pickle.loads(spill.read_bytes())
        if take:
            spill.unlink()
        return trace
    except OSError:
        read = read_rank(path, named)
        assert read is not None and read[3] is not None  # round 1 read it
        return read[3]


def scan(paths: Sequence[Path], executor: Executor, *, partial: bool = False, steps_from: str | None = None,
         critical_paths: bool = True, align_clocks: bool = True, progress: Progress | None = None) -> Scan:
    """Scans the job in ``paths`` (files or folders, one file per rank), one task per rank file on ``executor``.

    Args:
        critical_paths (bool): stitch each step's critical path and breakdown from the ranks' chains (the
            driver then holds each rank's chains, tens of bytes per event; without, its members only).

    Between the rounds, each rank's parsed trace waits in the temporary folder of the node that read it
    (``tempfile.gettempdir()``), and its next task is sent there; the folder is removed at the end.

    Raises:
        TraceFormatError: as ``read_trace``: a file unreadable or not a trace, no usable event, two files
            claiming one rank, ranks missing (unless ``partial``).
    """
    spill = Path(tempfile.gettempdir()) / f"oracle-scan-{uuid.uuid4().hex}"
    try:
        return _scan(trace_files(paths), executor, spill, partial, (steps_from, critical_paths), align_clocks, progress)
    finally:
        shutil.rmtree(spill, ignore_errors=True)  # this node's; a cluster's other nodes' are taken by round 2


def _scan(files: list[tuple[Path, bool]], executor: Executor, spill: Path, partial: bool, how: tuple[str | None, bool],
          align_clocks: bool, progress: Progress | None) -> Scan:
    items = [(p, named, spill / f"{i}.trace") for i, (p, named) in enumerate(files)]
    clock = _Stopwatch()
    peak: dict[Path, int] = defaultdict(int)  # per rank (its spill's name), the peak of its tasks
    with clock("map"):
        read = _mapped(executor, _keys_task, items, "reading", progress, peak)
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
    with clock("reduce"):
        jobs, table = match_job(keys, frame)
    with clock("map"):
        summaries = _summaries(executor, rank_items, jobs, how, near, "summarising", progress, peak)
    with clock("reduce"):
        n_ranks = max(k.rank for k in keys) + 1
        clocks = offsets_of(_member_times(summaries, table, frame), n_ranks) if align_clocks else None
    if clocks is not None and clocks.any():  # the members again, with the ranks' clocks in step
        frame = JobFrame.of(keys, clocks.offset_ns)
        with clock("reduce"):
            jobs, table = match_job(keys, frame)
        with clock("map"):
            summaries = _summaries(executor, rank_items, jobs, how, near, "summarising on one clock", progress, peak)
    settled, again = _settled(summaries, jobs, table, frame) if how[1] else ([], [])
    if again:  # ranks whose instances' first ends other ranks moved: their chains again, with the moved ends
        with clock("map"):
            redone = _summaries(executor, [rank_items[i] for i in again], [settled[i] for i in again], how,
                                [near[i] for i in again], "summarising with the settled ends", progress, peak)
        for i, s in zip(again, redone):
            summaries[i] = s
            jobs[i] = settled[i]
    sizes = tuple(len(pickle.dumps(k)) + len(pickle.dumps(s)) for k, s in zip(keys, summaries))
    # each rank's first node: the job's graph numbers each rank's nodes after the lower ranks'
    base = np.cumsum([0] + [s.nodes for s in summaries])[:-1].tolist()
    with clock("reduce"):
        out, raw_stragglers = _joined(summaries, base, table, frame, clocks, sizes)
    if how[1]:
        with clock("reduce"):
            complete = [r for r in out.steps if (r.step, r.rank) not in out.partial_steps]
            of_rank: dict[int, list[StepReport]] = defaultdict(list)
            for r in complete:
                of_rank[r.rank].append(r)
            peers = p2p_peers(np.concatenate([s.instance for s in summaries]),
                              np.concatenate([np.full(len(s.instance), s.rank) for s in summaries]), table)
            slow = frozenset(x.step for x in out.slow_steps)
            given = [for_rank(s, b, frame.shift_ns[s.rank], of_rank[s.rank], out.names, slow, peers)
                     for s, b in zip(summaries, base)]
        with clock("map"):
            found = _mapped(executor, _findings_task, [(*item, job, how[0], g) for item, job, g in
                                                      zip(rank_items, jobs, given)], "finding bottlenecks", progress,
                           peak, near)
        with clock("reduce"):
            by_rank = {s.rank: f for s, f in zip(summaries, found)}
            findings = job_findings(by_rank, raw_stragglers, complete, list(out.slow_steps), out.gpu, out.gpu_steps,
                                    list(out.arrivals), out.names)
        out = replace(out, findings=tuple(findings), gpu_bound=tuple(b for f in found for b in f.gpu_bound))
    return replace(out, task_peak_bytes=tuple(peak[item[2]] for item in rank_items), seconds=dict(clock.seconds))


class _Stopwatch:
    """Seconds spent in each named stage, summed over its blocks: ``with clock("map"): ...``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - t0


def _mapped(executor: Executor, fn: Callable[..., object], items: list, what: str,  # type: ignore[type-arg]
            progress: Progress | None, peak: dict[Path, int], near: list[str] | None = None) -> list:  # type: ignore[type-arg]
    """``executor.map``, each task's peak noted in ``peak`` under its rank's spill (the third of its item)."""
    done = [0]

    def tick(_: int) -> None:
        done[0] += 1
        if progress is not None:
            progress(what, done[0], len(items))
    out = executor.map(fn, items, done=tick, near=near)
    for item, p in zip(items, executor.stats.peak_rss_bytes):
        peak[item[2]] = max(peak[item[2]], p)
    return out


def _summaries(executor: Executor, items: list[tuple[Path, bool, Path]], jobs: list[JobCollectives],
               how: tuple[str | None, bool], near: list[str], what: str, progress: Progress | None,
               peak: dict[Path, int]) -> list[RankSummary]:
    return _mapped(executor, _summary_task, [(*item, job, *how) for item, job in zip(items, jobs)], what,
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

