"""The straggler study's op table from Megatron-LM's timers recorded as profiler ranges: a range named as an op
type (``forward-compute``, ``backward-send``, ``optimizer``...) inside a ``ProfilerStep#N`` of a worker's trace.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from bottleneck_oracle.errors import ConfigError, TraceFormatError
from bottleneck_oracle.traces.events import Trace
from bottleneck_oracle.traces.loader import read_trace
from bottleneck_oracle.traces.op_table import OPTYPES, JobLayout
from bottleneck_oracle.traces.types import EventKind

__all__ = ["has_megatron_ranges", "op_table_from_megatron_ranges", "op_table_from_megatron_trace"]

log = logging.getLogger(__name__)

_STEP = re.compile(r"ProfilerStep#(\d+)$")
# Megatron's combined p2p timers: one exchange, recorded as both of its ops with the same span (as the study does)
_COMBINED = {"forward-send-backward-recv": ("forward-send", "backward-recv"),
             "backward-send-forward-recv": ("backward-send", "forward-recv")}
_TIMERS = {**{name: (name,) for name in OPTYPES}, **_COMBINED}
_COMPUTE = ("forward-compute", "backward-compute")
_NS_PER_S = 1e9
_SCHEMA = pa.schema([
    ("dp_rank", pa.int32()), ("stage", pa.int32()), ("rank", pa.int32()), ("step", pa.int64()),
    ("optype", pa.string()), ("start_ts", pa.float64()), ("duration", pa.float64()), ("seq_id", pa.int32()),
    ("mc", pa.int32()), ("gmc", pa.int32()), ("mb_id", pa.int32()),
])

Span = tuple[str, int, int]  # (op type, start ns, end ns) on the trace's clock


@dataclass(frozen=True, slots=True)
class _Worker:
    """A recorded worker: the first rank of its tensor/sequence-parallel group, and its trace file."""

    rank: int
    dp_rank: int
    stage: int
    path: Path


def _name_ids(trace: Trace, keep: Callable[[str], object]) -> np.ndarray:
    """The interned ids of the names in ``trace.strings`` that ``keep`` accepts."""
    return np.array([i for i, s in enumerate(trace.strings) if keep(s)], dtype=np.int32)


def has_megatron_ranges(trace: Trace) -> bool:
    """Whether any rank's profiler ranges (``user_annotation`` or ``gpu_user_annotation``) carry a Megatron
    timer's name."""
    ev = trace.events
    ranges = np.isin(ev.kind, (EventKind.ANNOTATION, EventKind.GPU_ANNOTATION))
    return bool((ranges & np.isin(ev.name, _name_ids(trace, _TIMERS.__contains__))).any())


def _workers(trace: Trace, layout: JobLayout, folder: Path) -> list[_Worker]:
    """The recorded workers, in (stage, dp_rank) order; ranks that are not their group's first are skipped."""
    group = layout.tp * layout.dsp
    sizes = f"dp {layout.dp} x pp {layout.pp} x tp {layout.tp} x dsp {layout.dsp} = {layout.world_size} ranks"
    found: dict[int, Path] = {}
    for info in trace.ranks:
        if info.rank >= layout.world_size:
            raise TraceFormatError(f"{info.path.name}: rank {info.rank} is outside the layout ({sizes})")
        if info.world_size is not None and info.world_size != layout.world_size:
            raise TraceFormatError(f"{info.path.name}: world size {info.world_size}, but the layout has {sizes}")
        if info.rank % group == 0:
            found[info.rank] = info.path
    workers = []
    for k in range(layout.dp * layout.pp):
        stage, dp_rank = divmod(k, layout.dp)
        rank = k * group  # Megatron's default order: tp fastest, then dp, then pp
        if rank not in found:
            raise TraceFormatError(f"{folder}: no trace of rank {rank} (dp_rank {dp_rank}, stage {stage}), the first "
                                   f"of its tensor/sequence-parallel group; it is the one read for that worker")
        workers.append(_Worker(rank, dp_rank, stage, found[rank]))
    return workers


def _rank_rows(trace: Trace, rank: int, ids: np.ndarray) -> tuple[np.ndarray, int]:
    """The rank's ranges named by ``ids``: host ranges when it has any, else device ranges; and their kind."""
    ev = trace.events
    mine = (ev.rank == rank) & np.isin(ev.name, ids)
    for kind in (EventKind.ANNOTATION, EventKind.GPU_ANNOTATION):
        if (rows := np.flatnonzero(mine & (ev.kind == kind))).size:
            return rows, int(kind)
    return np.zeros(0, dtype=np.int64), int(EventKind.ANNOTATION)


def _enclosing_trimmed(spans: list[Span]) -> list[Span]:
    """A range that holds ranges of other op types starts where the last of them ends: Megatron's ``optimizer``
    times the whole ``step()``, ``optimizer-clip-main-grad`` inside it, and the study's tables put them one
    after the other. Ranges of the same span (a combined exchange) do not hold each other."""
    out = []
    for optype, start, end in spans:
        held = [e for o, s, e in spans if o != optype and start <= s and e <= end and (s, e) != (start, end)
                and e > s]
        out.append((optype, max([start, *held]) if held else start, end))
    return out


def _rank_spans(trace: Trace, w: _Worker, timer_ids: np.ndarray, step_ids: np.ndarray) -> dict[int, list[Span]]:
    """ProfilerStep number -> the worker's timer ranges that start inside that step's range."""
    rows, kind = _rank_rows(trace, w.rank, timer_ids)
    if not rows.size:
        raise TraceFormatError(f"{w.path.name}: rank {w.rank} (dp_rank {w.dp_rank}, stage {w.stage}) has no "
                               f"Megatron timer ranges ({', '.join(_COMPUTE)}, ...)")
    ev = trace.events
    steps, step_kind = _rank_rows(trace, w.rank, step_ids)
    if step_kind != kind:  # device timer ranges: the host's steps when the device has no step ranges
        steps = np.flatnonzero((ev.rank == w.rank) & np.isin(ev.name, step_ids) & (ev.kind == EventKind.ANNOTATION))
    if not steps.size:
        raise TraceFormatError(f"{w.path.name}: no ProfilerStep#N ranges")
    steps = steps[np.argsort(ev.start_ns[steps], kind="stable")]
    at = np.searchsorted(ev.start_ns[steps], ev.start_ns[rows], side="right") - 1
    spans: dict[int, list[Span]] = {}
    for row, k in zip(rows.tolist(), at.tolist()):
        step_row = int(steps[k]) if k >= 0 else -1
        if step_row < 0 or ev.start_ns[row] > ev.end_ns[step_row]:
            continue  # outside every step
        m = _STEP.match(trace.strings[ev.name[step_row]])
        assert m is not None  # step rows are the names that match
        n = int(m.group(1))
        for optype in _TIMERS[trace.strings[ev.name[row]]]:
            spans.setdefault(n, []).append((optype, int(ev.start_ns[row]), int(ev.end_ns[row])))
    return {n: _enclosing_trimmed(s) for n, s in spans.items()}


def _rows(spans: list[Span], w: _Worker, step: int, origin_ns: int) -> list[tuple[object, ...]]:
    """Numbered rows: ``seq_id`` counts each op type from 0 in start order; a compute's ``mb_id`` is its seq_id."""
    seen: Counter[str] = Counter()
    rows: list[tuple[object, ...]] = []
    for optype, start, end in sorted(spans, key=lambda s: (s[1], s[2])):
        seq = seen[optype]
        rows.append((w.dp_rank, w.stage, w.rank, step, optype, (start - origin_ns) / _NS_PER_S,
                     (end - start) / _NS_PER_S, seq, 0, w.stage, seq if optype in _COMPUTE else -1))
        seen[optype] += 1
    return rows


def _readable(layout: JobLayout | None, folder: Path) -> JobLayout:
    if layout is None:
        raise ConfigError(f"{folder}: Megatron timer ranges do not say the job's layout; pass --dp and --pp "
                          "(and --tp, --dsp)")
    if layout.vpp > 1:
        raise ConfigError(f"{folder}: vpp {layout.vpp}: Megatron timer ranges do not say their model chunk; "
                          "only vpp 1 can be read")
    return layout


def op_table_from_megatron_trace(trace: Trace, layout: JobLayout | None,
                                 folder: Path | str) -> tuple[pa.Table, dict[str, object]]:
    """``op_table_from_megatron_ranges`` of a trace already read (``folder`` names it in errors)."""
    folder = Path(folder)
    layout = _readable(layout, folder)
    workers = _workers(trace, layout, folder)
    timer_ids, step_ids = _name_ids(trace, _TIMERS.__contains__), _name_ids(trace, _STEP.match)
    per_worker = [_rank_spans(trace, w, timer_ids, step_ids) for w in workers]
    complete = set.intersection(*(set(s) for s in per_worker))
    dropped = sorted(set().union(*per_worker) - complete)
    if dropped:
        log.info("%s: steps %s left out: not recorded on every worker", folder.name, dropped)
    if not complete:
        raise TraceFormatError(f"{folder}: no ProfilerStep#N holds Megatron timer ranges on every recorded worker")
    rows: list[tuple[object, ...]] = []
    for step in sorted(complete):
        origin = min(start for spans in per_worker for _, start, _ in spans[step])
        for w, spans in zip(workers, per_worker):
            rows += _rows(spans[step], w, step, origin)
    microbatches = max(Counter(s[0] for s in spans[n])["forward-compute"] for spans in per_worker for n in complete)
    meta: dict[str, object] = {"dp_size": layout.dp, "pp_size": layout.pp, "tp_size": layout.tp,
                               "dsp_size": layout.dsp, "vpp_size": 1, "world_size": layout.world_size,
                               "trial_name": layout.name or folder.name, "microbatches": microbatches,
                               "dropped_steps": dropped}
    return pa.Table.from_pylist([dict(zip(_SCHEMA.names, row)) for row in rows], schema=_SCHEMA), meta


def op_table_from_megatron_ranges(folder: Path | str,
                                  layout: JobLayout | None) -> tuple[pa.Table, dict[str, object]]:
    """The op table of a Megatron-LM job whose timers were recorded as profiler ranges.

    A timer range is a ``user_annotation`` (or, on a rank with none, a ``gpu_user_annotation``) named as an op
    type of ``OPTYPES``; the combined ``forward-send-backward-recv`` and ``backward-send-forward-recv`` each
    become both of their ops with the range's span. One row per range that starts inside a ``ProfilerStep#N``
    (``step`` = N) of a recorded worker: ``start_ts`` and ``duration`` in seconds, from the step's first range
    on any worker; ``seq_id`` the range's place among its op type in the step; ``mb_id`` that place for
    ``forward-compute`` / ``backward-compute``, -1 elsewhere; ``mc`` 0 and ``gmc`` the stage. A range that
    holds ranges of other types starts where the last of them ends (``optimizer`` around
    ``optimizer-clip-main-grad``). Ranks map to workers in Megatron's default order,
    ``rank = (stage * dp + dp_rank) * tp * dsp``; a rank that is not the first of its tensor/sequence-parallel
    group is skipped. A step missing on some worker is left out. Interleaved schedules (vpp > 1) are refused:
    a range does not say its model chunk, so chunks are not recovered.

    Args:
        folder (Path | str): the job's Kineto traces, one file per recorded rank (some ranks may be absent).
        layout (JobLayout | None): the job's sizes, which a trace does not hold; None raises.

    Returns:
        The table and its meta (``dp_size, pp_size, tp_size, dsp_size, vpp_size, world_size, trial_name,
        microbatches, dropped_steps``).

    Raises:
        ConfigError: no layout, or vpp > 1.
        TraceFormatError: a rank or world size outside the layout, a worker's first rank not recorded or
            without timer ranges or ProfilerStep ranges, or no step recorded on every worker.
    """
    folder = Path(folder)
    layout = _readable(layout, folder)  # before reading what may be many files
    return op_table_from_megatron_trace(read_trace(folder, partial=True), layout, folder)
