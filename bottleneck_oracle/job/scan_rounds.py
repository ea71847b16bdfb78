"""The tasks of a scan's rounds (``job/scan.py``), and how a rank's parsed trace waits between them on the node
that read it.

Round 1 reads a rank's file and leaves the parsed trace in the node's temporary folder; each later round takes
it from there (the last removes it), or reads the file again where it finds none (the task ran on another node,
or the folder took nothing). The last round builds the rank's graph once for every detector and, when asked, the
replay of edits (``replay/rank_replay.py``).
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from bottleneck_oracle.graph.build import build_graph
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.job_collectives import JobCollectives
from bottleneck_oracle.job.job_paths import rank_points
from bottleneck_oracle.replay.rank_replay import RankReplay, rank_replay
from bottleneck_oracle.job.scan_findings import RankFindings, RankPathsOf, findings_of_rank
from bottleneck_oracle.job.summary import RankKeys, RankSummary, rank_keys, rank_summary
from bottleneck_oracle.executor import Executor
from bottleneck_oracle.traces import Trace, read_rank
from bottleneck_oracle.truth.edits import Edit

__all__ = ["KeptJob", "Progress", "Stopwatch", "graph_task", "keys_task", "last_task", "mapped", "summary_task"]

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]  # (round, ranks done, ranks)
R = TypeVar("R")


def keys_task(item: tuple[Path, bool, Path]) -> tuple[int, Path, int | None, RankKeys | None] | None:
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


def summary_task(item: tuple[Path, bool, Path, JobCollectives, str | None, bool, bool]) -> RankSummary:
    """Round 2 of one file (``last``: no round follows, the trace is taken)."""
    path, named, spill, job, steps_from, paths, last = item
    return rank_summary(_kept(path, named, spill, take=last), job, steps_from, paths)


def last_task(item: tuple[Path, bool, Path, JobCollectives, str | None, RankPathsOf | None, tuple[Edit, ...], bool]
              ) -> tuple[RankFindings | None, RankReplay | None]:
    """The last round of one file: its detectors on its steps' paths (given them), the replay of the edits (given
    some); ``take``: the trace is then removed (no round follows)."""
    path, named, spill, job, steps_from, given, edits, take = item
    g = build_graph(_kept(path, named, spill, take=take), steps_from=steps_from, job=job)
    points, heard = rank_points(g, job)
    return (findings_of_rank(g, points, given) if given is not None else None,
            rank_replay(g, points, job, heard, edits) if edits else None)


def graph_task(item: tuple[Path, bool, Path, JobCollectives, str | None, Callable[..., object], object, bool]
               ) -> object:
    """A round after the scan's own: ``fn(graph, job, arg, state)``, where ``graph()`` builds the rank's graph as
    the job's graph has it, and ``state`` is a file of this node where ``fn`` may keep what its next round on
    the rank reads (it must do without, should the round run elsewhere). ``take``: both are then removed."""
    path, named, spill, job, steps_from, fn, arg, take = item
    state = spill.with_suffix(".state")
    built: list[ExecGraph] = []

    def graph() -> ExecGraph:
        if not built:
            built.append(build_graph(_kept(path, named, spill, take=False), steps_from=steps_from, job=job))
        return built[0]
    try:
        return fn(graph, job, arg, state)
    finally:
        if take:
            for f in (spill, state):
                f.unlink(missing_ok=True)


@dataclass
class KeptJob:
    """A scanned job whose ranks' traces still wait where round 1 read them, for rounds after the scan's own
    (``scan(then=...)``): each rank's file, its collectives as the job matched them, its summary and first node in
    the job's graph, and its clock's shift."""

    executor: Executor
    items: list[tuple[Path, bool, Path]]
    jobs: list[JobCollectives]
    near: list[str]
    steps_from: str | None
    summaries: list[RankSummary]
    base: list[int]
    shift_ns: np.ndarray
    progress: Progress | None
    peak: dict[Path, int]

    def map(self, fn: Callable[..., R], args: Sequence[object], what: str, part: slice = slice(None),
            last: bool = False) -> list[R]:
        """``fn(graph, job, arg, state)`` (``graph_task``) on every rank (of ``part`` of them), ``args`` one per rank,
        in order; ``last``: no round follows on these ranks, their traces and states are removed."""
        ranks = range(len(self.items))[part]
        return mapped(self.executor, graph_task, [(*self.items[i], self.jobs[i], self.steps_from, fn, arg, last)
                                                  for i, arg in zip(ranks, args)], what, self.progress, self.peak,
                      [self.near[i] for i in ranks])


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


class Stopwatch:
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


def mapped(executor: Executor, fn: Callable[..., object], items: Sequence, what: str,  # type: ignore[type-arg]
           progress: Progress | None, peak: dict[Path, int], near: list[str] | None = None) -> list:  # type: ignore[type-arg]
    """``executor.map``, each task's peak noted in ``peak`` under its rank's spill (the third of its item)."""
    done = [0]

    def tick(_: int) -> None:
        done[0] += 1
        if progress is not None:
            progress(what, done[0], len(items))
    out = executor.map(fn, list(items), done=tick, near=near)
    for item, p in zip(items, executor.stats.peak_rss_bytes):
        peak[item[2]] = max(peak[item[2]], p)
    return out
