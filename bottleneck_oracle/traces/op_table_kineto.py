"""The straggler study's op-level table from the Kineto traces of a ``capture --pipeline`` job: its micro-batch
annotations, send/recv calls, gradient all-reduce and optimizer step, mapped to the study's op types.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces.events import Trace
from bottleneck_oracle.traces.loader import check_ranks, read_trace
from bottleneck_oracle.traces.op_table import JobLayout
from bottleneck_oracle.traces.op_table_megatron import has_megatron_ranges, op_table_from_megatron_trace
from bottleneck_oracle.traces.types import EventKind

__all__ = ["op_table_from_kineto", "write_op_table"]

log = logging.getLogger(__name__)

_STEP = re.compile(r"ProfilerStep#(\d+)$")
_COMPUTE = re.compile(r"## (forward|backward) mb(\d+) ##$")
_P2P_CALLS = {"c10d::send": "send", "c10d::recv_": "recv"}
_P2P_WORK = {"send": "gloo:send", "recv": "gloo:recv"}  # the transfer, which outlives the call
_ALL_REDUCE_CALL, _ALL_REDUCE_WORK = "c10d::allreduce_", "gloo:all_reduce"
_OPTIMIZER_STEP, _OPTIMIZER_ZERO = "Optimizer.step#", "Optimizer.zero_grad#"
_NS_PER_S = 1e9
_SCHEMA = pa.schema([
    ("dp_rank", pa.int32()), ("stage", pa.int32()), ("rank", pa.int32()), ("step", pa.int64()),
    ("optype", pa.string()), ("start_ts", pa.float64()), ("duration", pa.float64()), ("seq_id", pa.int32()),
    ("mc", pa.int32()), ("gmc", pa.int32()), ("mb_id", pa.int32()),
])


@dataclass(frozen=True, slots=True)
class _Op:
    """One row before numbering: its type, its span (ns from the trace origin) and its micro-batch."""

    optype: str
    start_ns: int
    end_ns: int
    mb_id: int = -1


@dataclass(frozen=True, slots=True)
class _RankEvents:
    """The CPU ops and annotations of one rank, sorted by start.

    Args:
        path (Path): the rank's trace file (named in errors).
        name (np.ndarray): object[N], the events' names.
        start_ns (np.ndarray): int64[N], from the trace origin.
        end_ns (np.ndarray): int64[N].
        peer (np.ndarray): int32[N], the other rank of a send/recv call, -1 elsewhere.
    """

    path: Path
    name: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    peer: np.ndarray

    def within(self, start_ns: int, end_ns: int) -> _RankEvents:
        """The events that start inside ``[start_ns, end_ns]``."""
        rows = slice(int(np.searchsorted(self.start_ns, start_ns, side="left")),
                     int(np.searchsorted(self.start_ns, end_ns, side="right")))
        return _RankEvents(self.path, self.name[rows], self.start_ns[rows], self.end_ns[rows], self.peer[rows])

    def named(self, name: str, prefix: bool = False) -> np.ndarray:
        """Rows whose name is ``name`` (or starts with it), in start order."""
        hits = [n.startswith(name) for n in self.name] if prefix else [n == name for n in self.name]
        return np.flatnonzero(np.array(hits, dtype=bool))


def _rank_events(trace: Trace, rank: int) -> _RankEvents:
    ev = trace.events
    rows = np.flatnonzero((ev.rank == rank) & np.isin(ev.kind, (EventKind.CPU_OP, EventKind.ANNOTATION)))
    rows = rows[np.argsort(ev.start_ns[rows], kind="stable")]
    names = np.asarray(trace.strings, dtype=object)[ev.name[rows]]
    return _RankEvents(trace.rank_info(rank).path, names, ev.start_ns[rows], ev.end_ns[rows], ev.peer[rows])


def _step_windows(events: _RankEvents) -> dict[int, tuple[int, int]]:
    """ProfilerStep number -> its (start, end) in ns."""
    windows = {}
    for row, name in enumerate(events.name):
        if m := _STEP.match(name):
            windows[int(m.group(1))] = (int(events.start_ns[row]), int(events.end_ns[row]))
    return windows


def _p2p_calls(events: _RankEvents) -> list[tuple[str, int, int, int]]:
    """``(send|recv, peer, start, end)`` of the step's send/recv calls, each ending when its transfer ends.

    The k-th ``gloo:send`` (``gloo:recv``) of a step is the transfer of its k-th ``c10d::send``
    (``c10d::recv_``): gloo runs them in the order they are posted.
    """
    calls = []
    for call, kind in _P2P_CALLS.items():
        rows, work = events.named(call), events.named(_P2P_WORK[kind])
        for k, row in enumerate(rows):
            if events.peer[row] < 0:
                raise TraceFormatError(f"{events.path.name}: {call} at {events.start_ns[row]} ns names no peer rank "
                                       "(recorded without record_shapes); cannot tell forward from backward")
            end = max(int(events.end_ns[row]), int(events.end_ns[work[k]]) if k < len(work) else 0)
            calls.append((kind, int(events.peer[row]), int(events.start_ns[row]), end))
    return sorted(calls, key=lambda c: c[2])


def _split_nested(calls: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
    """Spans that do not overlap: a call that still runs when the next starts ends there, and the next
    ends when the later of the two does.

    The capture posts a send and then receives from the same neighbour before waiting on the send, so
    the send's span holds the receive's; the send keeps its posting, the receive the wait for both.
    """
    out = list(calls)
    for i in range(len(out) - 1):
        kind, peer, start, end = out[i]
        nkind, npeer, nstart, nend = out[i + 1]
        if end > nstart:
            out[i] = (kind, peer, start, nstart)
            out[i + 1] = (nkind, npeer, nstart, max(end, nend))
    return out


def _p2p_optype(kind: str, peer: int, rank: int, stages: int, path: Path) -> str:
    """Forward traffic runs to the next rank (its next stage), backward traffic to the previous."""
    if peer not in (rank - 1, rank + 1) or peer // stages != rank // stages:
        raise TraceFormatError(f"{path.name}: rank {rank} {kind}s with rank {peer}, not its neighbour in a "
                               f"pipeline of {stages} stages")
    downstream = peer == rank + 1
    if kind == "send":
        return "forward-send" if downstream else "backward-send"
    return "backward-recv" if downstream else "forward-recv"


def _trim(start: int, end: int, p2p: list[_Op]) -> tuple[int, int]:
    """A compute span without the send/recv at its edges (the capture puts none inside; kept for safety)."""
    for op in p2p:
        if op.start_ns <= start < op.end_ns:
            start = op.end_ns
        elif op.start_ns < end <= op.end_ns:
            end = op.start_ns
    return start, max(start, end)


def _compute_ops(events: _RankEvents, p2p: list[_Op]) -> list[_Op]:
    ops = []
    for row, name in enumerate(events.name):
        if m := _COMPUTE.match(name):
            start, end = _trim(int(events.start_ns[row]), int(events.end_ns[row]), p2p)
            ops.append(_Op(f"{m.group(1)}-compute", start, end, int(m.group(2))))
    return ops


def _grads_reduce(events: _RankEvents, after_ns: int) -> list[_Op]:
    """The first all-reduce after the last compute: the gradients' (an injected one may follow). Its
    transfer runs on a gloo worker thread and ends after the call returns; the caller waits for it."""
    calls = [r for r in events.named(_ALL_REDUCE_CALL) if events.start_ns[r] >= after_ns]
    if not calls:
        return []
    row = calls[0]
    work = [r for r in events.named(_ALL_REDUCE_WORK) if events.start_ns[r] >= events.start_ns[row]]
    end = max(int(events.end_ns[row]), int(events.end_ns[work[0]]) if work else 0)
    return [_Op("grads-reduce-scatter", int(events.start_ns[row]), end)]


def _optimizer(events: _RankEvents) -> list[_Op]:
    """``optimizer.step()`` through the ``zero_grad()`` that follows it."""
    steps = events.named(_OPTIMIZER_STEP, prefix=True)
    if not len(steps):
        return []
    row = steps[-1]
    zeros = [r for r in events.named(_OPTIMIZER_ZERO, prefix=True) if events.start_ns[r] >= events.start_ns[row]]
    end = max(int(events.end_ns[row]), int(events.end_ns[zeros[0]]) if zeros else 0)
    return [_Op("optimizer", int(events.start_ns[row]), end)]


def _step_ops(events: _RankEvents, rank: int, stages: int, replicas: int) -> list[_Op]:
    """Every op of one rank in one step (``events`` already cut to the step's window)."""
    p2p = [_Op(_p2p_optype(kind, peer, rank, stages, events.path), start, end)
           for kind, peer, start, end in _split_nested(_p2p_calls(events))]
    compute = _compute_ops(events, p2p)
    last_compute = max((op.end_ns for op in compute), default=0)
    reduce = _grads_reduce(events, last_compute) if replicas > 1 else []
    return [*compute, *p2p, *reduce, *_optimizer(events)]


def _expected(stage: int, stages: int, replicas: int, microbatches: int) -> Counter[str]:
    """How many ops of each type a worker of ``stage`` runs per step."""
    want = Counter({"forward-compute": microbatches, "backward-compute": microbatches, "optimizer": 1})
    if stage > 0:
        want.update({"forward-recv": microbatches, "backward-send": microbatches})
    if stage < stages - 1:
        want.update({"forward-send": microbatches, "backward-recv": microbatches})
    if replicas > 1:
        want["grads-reduce-scatter"] = 1
    return want


def _missing(per_rank: list[dict[int, list[_Op]]], step: int, stages: int, replicas: int,
             microbatches: int) -> str | None:
    """What the first rank that lacks (or has extra) ops in ``step`` holds, or None when every rank is complete."""
    for rank, ops in enumerate(per_rank):
        found = Counter(op.optype for op in ops.get(step, ()))
        want = _expected(rank % stages, stages, replicas, microbatches)
        if found != want:
            wrong = sorted(set(found) | set(want), key=lambda k: (found[k] == want[k], k))[0]
            return f"rank {rank} has {found[wrong]} {wrong}, expected {want[wrong]}"
    return None


def _stage_count(ranks: list[_RankEvents], folder: Path) -> int:
    """Stages per replica, from who talks to whom: a replica's first stage never hears from the rank
    before it, and replicas sit on consecutive ranks."""
    peers = [set(r.peer[[n in _P2P_CALLS for n in r.name]].tolist()) for r in ranks]
    if not any(peers):
        raise TraceFormatError(f"{folder}: no send/recv with a peer rank in any trace; cannot tell the stage "
                               "count (pass stages)")
    firsts = [rank for rank in range(1, len(ranks)) if rank - 1 not in peers[rank]]
    return firsts[0] if firsts else len(ranks)


def _rows(ops: list[_Op], rank: int, stage: int, replica: int, step: int) -> list[tuple[object, ...]]:
    """Numbered rows: ``seq_id`` counts each op type from 0 in start order."""
    seen: Counter[str] = Counter()
    rows: list[tuple[object, ...]] = []
    for op in sorted(ops, key=lambda o: (o.start_ns, o.end_ns)):
        rows.append((replica, stage, rank, step, op.optype, op.start_ns / _NS_PER_S,
                     (op.end_ns - op.start_ns) / _NS_PER_S, seen[op.optype], 0, stage, op.mb_id))
        seen[op.optype] += 1
    return rows


def _rank_ops(events: _RankEvents, rank: int, stages: int, replicas: int) -> dict[int, list[_Op]]:
    """ProfilerStep number -> the rank's ops in that step."""
    windows = _step_windows(events)
    if not windows:
        raise TraceFormatError(f"{events.path.name}: no ProfilerStep#N ranges")
    return {step: _step_ops(events.within(start, end), rank, stages, replicas)
            for step, (start, end) in windows.items()}


def op_table_from_kineto(folder: Path | str, *, stages: int | None = None,
                         layout: JobLayout | None = None) -> tuple[pa.Table, dict[str, object]]:
    """The op-level table of a pipeline capture, one row per op of every rank in every complete step.

    Rank ``r`` is stage ``r % stages`` of replica (``dp_rank``) ``r // stages``. Op types: ``forward-compute``
    and ``backward-compute`` (the ``## forward mbK ##`` / ``## backward mbK ##`` spans), ``forward-recv``,
    ``forward-send``, ``backward-recv``, ``backward-send`` (send/recv calls to the next or previous rank,
    through the end of their gloo transfer; a send that holds the receive posted after it ends where the
    receive starts), ``grads-reduce-scatter`` (the gradient all-reduce, with more than one replica) and
    ``optimizer`` (``step()`` through ``zero_grad()``). ``start_ts`` is seconds from the job's first event,
    ``seq_id`` the op's place among its type in the step, ``mb_id`` the micro-batch of a compute op (else -1),
    ``mc`` 0 and ``gmc`` the stage. A step in which any rank lacks an op its stage runs is left out. Traces that
    hold Megatron's timer ranges and none of the capture's annotations go to ``op_table_from_megatron_trace``.

    Args:
        folder (Path | str): the capture's folder of ``rank{r}.pt.trace.json.gz`` files.
        stages (int | None): pipeline stages per replica; default: read from which ranks exchange
            activations. (default: ``None``)
        layout (JobLayout | None): the job's sizes, needed for Megatron timer ranges only. (default: ``None``)

    Returns:
        The table and its meta (``dp_size, pp_size, tp_size, dsp_size, vpp_size, world_size, trial_name,
        microbatches, dropped_steps``).

    Raises:
        TraceFormatError: no trace in the folder, ranks not a multiple of ``stages``, a rank without
            the pipeline's annotations, a send/recv without a peer or to a rank that is not a neighbour,
            or no step complete on every rank.
        ConfigError: Megatron timer ranges and no ``layout``.
    """
    folder = Path(folder)
    trace = read_trace(folder, partial=True)  # a Megatron job records some of its ranks
    ranks = [_rank_events(trace, info.rank) for info in trace.ranks]
    if not any(_COMPUTE.match(name) for events in ranks for name in events.name) and has_megatron_ranges(trace):
        return op_table_from_megatron_trace(trace, layout, folder)
    check_ranks([(info.rank, info.path, info.world_size) for info in trace.ranks], partial=False)
    for events in ranks:
        if not any(_COMPUTE.match(name) for name in events.name):
            raise TraceFormatError(f"{events.path.name}: not a pipeline capture (no '## forward mbK ##' annotations) "
                                   f"and no Megatron timer ranges; give the job's op table (trace.parquet and "
                                   f"meta.yaml) instead")
    stages = stages or _stage_count(ranks, folder)
    if stages < 1 or len(ranks) % stages:
        raise TraceFormatError(f"{folder}: {len(ranks)} ranks are not a multiple of {stages} pipeline stages")
    replicas = len(ranks) // stages
    per_rank = [_rank_ops(events, rank, stages, replicas) for rank, events in enumerate(ranks)]
    microbatches = 1 + max(op.mb_id for ops in per_rank for step_ops in ops.values() for op in step_ops)
    rows: list[tuple[object, ...]] = []
    dropped: list[int] = []
    why = ""
    for step in sorted(set().union(*per_rank)):
        if missing := _missing(per_rank, step, stages, replicas, microbatches):
            log.info("%s: step %d left out: %s", folder.name, step, missing)
            dropped.append(step)
            why = why or f"step {step}: {missing}"
            continue
        for rank, ops in enumerate(per_rank):
            rows += _rows(ops[step], rank, rank % stages, rank // stages, step)
    if not rows:
        raise TraceFormatError(f"{folder}: no step holds every op on every rank ({why})")
    meta: dict[str, object] = {"dp_size": replicas, "pp_size": stages, "tp_size": 1, "dsp_size": 1, "vpp_size": 1,
                               "world_size": len(ranks), "trial_name": folder.name, "microbatches": microbatches,
                               "dropped_steps": dropped}
    return pa.Table.from_pylist([dict(zip(_SCHEMA.names, row)) for row in rows], schema=_SCHEMA), meta


def write_op_table(table: pa.Table, meta: dict[str, object], folder: Path | str) -> None:
    """Writes ``trace.parquet`` and ``meta.yaml`` (flat keys; strings and lists in JSON form, which YAML reads).

    Args:
        table (pa.Table): the op table.
        meta (dict[str, object]): its layout and notes, as ``op_table_from_kineto`` returns them.
        folder (Path | str): where to write; created if missing.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / "trace.parquet", compression="zstd")
    lines = [f"{key}: {json.dumps(value)}" for key, value in meta.items()]
    (folder / "meta.yaml").write_text("\n".join(lines) + "\n")
