"""Kineto (PyTorch profiler Chrome JSON) file → columns of one rank.

Times become integer ns: ``ts``/``dur`` are µs whatever ``displayTimeUnit``
says; with ``baseTimeNanoseconds`` absolute ns = base + ts·1000. Epoch-scale
float ``ts`` (~1.7e15 µs) lose their ns digits in float64, so those files are
re-read with the exact decimal text of every timestamp.

An event with a malformed or out-of-range field is skipped and counted by
reason (``_validate``); the file is refused only when it is not a trace.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from operator import attrgetter
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from bottleneck_oracle.traces._decode import DecodedFile, Event, EventArgs, decode_events, decode_exact_times
from bottleneck_oracle.traces._other_recorders import lane_id, recorded_kinds
from bottleneck_oracle.traces._validate import (
    DUR_MAX_NS, MAX_RANKS, Checks, check_header, float_column, int_column, tally, time_checks, time_ok, to_int,
    uint_column,
)
from bottleneck_oracle.traces.events import UNREAD_CATEGORY, EventTable, FlowTable, LaneTable, ProcessGroup
from bottleneck_oracle.traces.types import EventKind, SyncKind

__all__ = ["RankPart", "parse_kineto"]

_KIND_BY_CAT = {
    "cpu_op": EventKind.CPU_OP,
    "operator": EventKind.CPU_OP,
    "user_annotation": EventKind.ANNOTATION,
    "python_function": EventKind.PYTHON,
    "cuda_runtime": EventKind.RUNTIME,
    "cuda_driver": EventKind.RUNTIME,
    "runtime": EventKind.RUNTIME,
    "kernel": EventKind.KERNEL,
    "gpu_memcpy": EventKind.MEMCPY,
    "memcpy": EventKind.MEMCPY,
    "gpu_memset": EventKind.MEMSET,
    "memset": EventKind.MEMSET,
    "cuda_sync": EventKind.SYNC,
    "gpu_user_annotation": EventKind.GPU_ANNOTATION,
}
_GPU_SIDE = frozenset(
    {EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.SYNC, EventKind.GPU_ANNOTATION}
)
_SYNC_BY_NAME = {
    "Context Sync": SyncKind.CONTEXT,
    "Stream Sync": SyncKind.STREAM,
    "Event Sync": SyncKind.EVENT,
    "Stream Wait Event": SyncKind.STREAM_WAIT,
}
_COMM_PREFIXES = ("c10d::", "gloo:", "nccl:", "record_param_comms")
_P2P_CALLS = ("c10d::send", "c10d::recv")
_LAUNCH_FLOW_CATS = frozenset({"ac2g", "async_cpu_to_gpu", "async"})  # "async": PyTorch 1.8-1.9
_NOT_OPS = frozenset({"trace", "overhead", "fwdbwd", "cpu_instant_event", *_LAUNCH_FLOW_CATS})  # no op in them
_UINT32_MINUS_ONE = 4294967295
_GENERIC_THREAD_NAMES = ("(python)", "(pt_main_thread)", "python", "pt_main_thread")
_FLOAT_EXACT_LIMIT_US = 9e12  # above this, float64 µs cannot hold every ns digit


@dataclass(frozen=True, slots=True)
class RankPart:
    """One Kineto file in columns; string and lane ids are local to the file.

    ``events.start_ns`` holds absolute epoch ns (base + ts).
    """

    path: Path
    events: EventTable
    lanes: LaneTable
    flows: FlowTable
    strings: list[str]
    dist_rank: int | None
    world_size: int | None
    backend: str | None
    base_ns: int
    devices: tuple[str, ...]
    process_groups: tuple[ProcessGroup, ...]
    window_ns: tuple[int, int]
    main_pid: str | None
    total_events: int
    zero_duration: int
    skipped: dict[str, int]  # events left out, by reason


def _first_numel(raw: msgspec.Raw) -> int:
    """Elements of the first tensor in an ``Input Dims`` value ([[[136714]], [], ...] → 136714)."""
    if not len(raw):
        return -1
    stack: list[object] = [msgspec.json.decode(raw)]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            if item and all(type(x) is int for x in item):
                n = math.prod(item)
                return n if -1 <= n < 2**63 else -1
            stack.extend(reversed(item))
    return -1


def _peer(raw: msgspec.Raw) -> int:
    """The peer rank of ``c10d::send``/``c10d::recv_``: its third concrete input ([tensors, group, peer, tag])."""
    if not len(raw):
        return -1
    values = msgspec.json.decode(raw)
    peer = to_int(values[2]) if isinstance(values, list) and len(values) > 2 else -1
    return peer if -1 <= peer < 2**31 else -1


def _exact_us_to_ns(text: bytes | None) -> int:
    if text is None:
        return 0
    whole, dot, frac = text.partition(b".")
    if not dot and whole.lstrip(b"-").isdigit():
        return int(whole) * 1000
    if not dot or not frac.isdigit() or b"e" in whole.lower():
        return round(float(text) * 1000)
    digits = (frac + b"000")[:3]
    extra = frac[3:4]
    ns = int(whole) * 1000 + (int(digits) if not whole.startswith(b"-") else -int(digits))
    return ns + (1 if extra and extra >= b"5" else 0)


CHUNK_EVENTS = 8_192  # events decoded to Python objects at a time: a few MB of them, not the file


class _Interner:
    """String → dense id, shared by all columns and chunks of one file."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {"": 0}
        self.strings: list[str] = [""]

    def column(self, values: list[str]) -> np.ndarray:
        ids = self.ids
        for v in dict.fromkeys(values):
            if v not in ids:
                ids[v] = len(self.strings)
                self.strings.append(v)
        return np.fromiter(map(ids.__getitem__, values), dtype=np.int32, count=len(values))


class _Side:
    """The few non-complete events a file holds: thread names, flows, window marks."""

    def __init__(self, base_ns: int, skipped: Counter[str]) -> None:
        self.labels: dict[tuple[str, str], str] = {}
        self.fwdbwd: list[tuple[int, bool, str, str, float]] = []
        self.launch_flow_ends: dict[tuple[str, str, float], int] = {}
        self.marks: list[float] = []
        self.base_ns, self.skipped = base_ns, skipped

    def collect_launch_flows(self, events: list[Event]) -> None:
        """ac2g flow ends, for GPU events written without a correlation arg (rare: read only then)."""
        for e in events:
            if e.ph == "f" and e.cat in _LAUNCH_FLOW_CATS and e.id is not None and e.ts is not None:
                self.launch_flow_ends[(str(e.pid), str(e.tid), e.ts)] = to_int(e.id)

    def _timed(self, e: Event) -> bool:
        """Whether a side event's time is usable; counts it skipped if not."""
        reason = ("no ts" if e.ts is None else "ts out of range" if not time_ok(e.ts, self.base_ns)
                  else "bad dur" if e.ph == "X" and not (0 <= (e.dur or 0) * 1000 < DUR_MAX_NS) else None)
        if reason:
            self.skipped[reason] += 1
        return reason is None

    def collect(self, events: list[Event]) -> None:
        # ops, launch flows and memory instants are the bulk: only a few events matter here
        keep = [e for e in events if e.ph == "M" or e.cat == "fwdbwd" or e.cat == "Trace"
                or (e.cat is None and e.ph in ("i", "I"))]
        for e in keep:
            ph = e.ph
            if ph == "X":
                if e.cat == "Trace" and self._timed(e):
                    self.marks += [e.ts, e.ts + (e.dur or 0)]  # type: ignore[list-item, operator]
            elif ph == "M":
                if e.name == "thread_name" and isinstance(e.args.label, str):
                    key = (str(e.pid), str(e.tid))
                    # a tid can be named twice ("python", then "pt_gloo_runloop"): keep the specific one
                    if key not in self.labels or not e.args.label.endswith(_GENERIC_THREAD_NAMES):
                        self.labels[key] = e.args.label
            elif ph in ("s", "f") and e.cat == "fwdbwd":
                flow_id = to_int(e.id)
                if flow_id < 0:
                    self.skipped["bad id"] += 1
                elif self._timed(e):
                    self.fwdbwd.append((flow_id, ph == "s", str(e.pid), str(e.tid), e.ts))  # type: ignore[arg-type]
            elif ph in ("i", "I") and e.name and (
                e.name.startswith("Iteration Start") or e.name == "Record Window End"
            ) and self._timed(e):
                self.marks.append(e.ts)  # type: ignore[arg-type]


_ATTRS = {name: attrgetter(name) for name in (
    "correlation", "external_id", "old_external_id", "stream", "device", "nbytes", "seq_number", "wait_stream",
    "wait_record", "coll_seq", "group_size")}
_JSON_NAME = {f.name: f.encode_name for f in msgspec.structs.fields(EventArgs)}


def _chunk_columns(xs: list[Event], interner: _Interner) -> tuple[dict[str, np.ndarray], Checks]:
    """Columns of the complete events of one chunk (times still in the file's µs), and the
    checks of their values that could not be stored (see ``_validate``)."""
    args = [e.args for e in xs]
    names = [e.name or "" for e in xs]
    col: dict[str, np.ndarray] = {}
    checks: Checks = []
    for k, get in _ATTRS.items():
        col[k], bad = int_column(list(map(get, args)))
        checks.append((f"bad {_JSON_NAME[k]}", bad))
    old_id = col.pop("old_external_id")
    col["external_id"] = np.where(col["external_id"] != -1, col["external_id"], old_id)
    checks.append(("bad Group size", (col["group_size"] < -(2**31)) | (col["group_size"] >= 2**31)))
    col["group_size"] = col["group_size"].astype(np.int32)
    is_comm = [n.startswith(_COMM_PREFIXES) for n in names]
    col["nelems"] = np.array([
        to_int(a.in_nelems) if a.in_nelems != -1 else (_first_numel(a.input_dims) if c else -1)
        for a, c in zip(args, is_comm)], dtype=np.int64)
    col["comms_id"], bad = uint_column([a.comms_id for a in args])
    checks.append(("bad Comms Id", bad))
    col["peer"] = np.array([_peer(a.concrete_inputs) if n.startswith(_P2P_CALLS) else -1
                            for a, n in zip(args, names)], dtype=np.int32)
    col["sync_kind"] = np.array([_SYNC_BY_NAME.get(a.sync_kind, 0) for a in args], dtype=np.int8)
    col["name"] = interner.column(names)
    col["coll_name"] = interner.column([a.coll_name for a in args])
    col["pg_name"] = interner.column([a.pg_name or (str(to_int(a.pg_id)) if a.pg_id != -1 else "") for a in args])
    col["dtype"] = interner.column([a.dtype for a in args])
    kind_of = {c: _KIND_BY_CAT[c.lower()] for c in {e.cat for e in xs}}  # type: ignore[union-attr]
    kinds = [kind_of[e.cat] for e in xs]
    col["kind"] = recorded_kinds(names, kinds)
    col["pid"] = interner.column([str(e.pid) for e in xs])
    col["tid"] = interner.column([str(e.tid) for e in xs])
    col["ts"] = float_column([e.ts for e in xs])  # µs ints < 2**53 stay exact; None → nan
    col["is_int_ts"] = np.array([type(e.ts) is int for e in xs], dtype=bool)
    col["dur"] = float_column([e.dur for e in xs])
    return col, checks


def _decode_chunks(doc: DecodedFile, base_ns: int, skipped: Counter[str]
                   ) -> tuple[dict[str, np.ndarray], np.ndarray, _Side, _Interner]:
    raws = doc.traceEvents or []
    interner, side = _Interner(), _Side(base_ns, skipped)
    parts, rows = [], []
    for lo in range(0, len(raws), CHUNK_EVENTS):
        events = decode_events(raws[lo : lo + CHUNK_EVENTS], skipped)
        side.collect(events)
        seen = {e.cat for e in events}  # few distinct
        cats = {c for c in seen if c and c.lower() in _KIND_BY_CAT}
        if None in seen and (n := sum(1 for e in events if e.ph == "X" and e.cat is None)):
            skipped["no cat"] += n
        if other := {c for c in seen if c and c not in cats and c.lower() not in _NOT_OPS}:
            # another accelerator's device events (MTIA's mtia_ccp_events) must not vanish unsaid
            for cat, n in Counter(e.cat for e in events if e.cat in other and e.ph == "X").items():
                skipped[f"{UNREAD_CATEGORY}{cat[:40]}"] += n
        idx = np.array([i for i, e in enumerate(events) if e.ph == "X" and e.cat in cats], dtype=np.int64)
        col, checks = _chunk_columns([events[i] for i in idx.tolist()], interner)
        keep = tally(checks + time_checks(col["ts"], col["dur"], base_ns), skipped)
        if keep is not None:
            col, idx = {k: v[keep] for k, v in col.items()}, idx[keep]
        parts.append(col)
        gpu = np.isin(col["kind"], (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET))
        if (gpu & (col["correlation"] < 0)).any():
            side.collect_launch_flows(events)
        rows.append(idx + lo)
        del events
    if not parts:
        parts.append(_chunk_columns([], interner)[0])
    cols = {k: np.concatenate([p.pop(k) for p in parts]) for k in list(parts[0])}  # one column at a time
    return cols, np.concatenate(rows) if rows else np.zeros(0, np.int64), side, interner


def _start_ns(cols: dict[str, np.ndarray], doc: DecodedFile, rows: np.ndarray) -> np.ndarray:
    ts, is_int = cols["ts"], cols["is_int_ts"]
    start = np.where(is_int, ts.astype(np.int64) * 1000, np.rint(ts * 1000.0).astype(np.int64))
    if (~is_int & (np.abs(ts) >= _FLOAT_EXACT_LIMIT_US)).any():
        raws = doc.traceEvents or []
        text = [t for lo in range(0, len(raws), CHUNK_EVENTS) for t in decode_exact_times(raws[lo : lo + CHUNK_EVENTS])]
        start = np.array([_exact_us_to_ns(text[i]) for i in rows.tolist()], dtype=np.int64)
    return start


def _lanes(cols: dict[str, np.ndarray], interner: _Interner, labels: dict[tuple[str, str], str]):  # type: ignore[no-untyped-def]
    """Lane of every event: (pid, tid) for CPU events, (device, stream) for GPU-side ones."""
    strings = interner.strings
    as_int = np.array([lane_id(x) for x in strings], dtype=np.int64)
    gpu = np.isin(cols["kind"], list(_GPU_SIDE))
    dev = np.where(cols["device"] != -1, cols["device"], as_int[cols["pid"]])
    stream = np.where(cols["stream"] != -1, cols["stream"], as_int[cols["tid"]])
    stream = np.where(stream == _UINT32_MINUS_ONE, -1, stream)
    a = np.where(gpu, dev, cols["pid"]) + 1
    b = np.where(gpu, stream, cols["tid"]) + 1
    key = gpu.astype(np.int64) << 62 | (a & 0x7FFFFFFF) << 31 | (b & 0x7FFFFFFF)
    keys, first, lane = np.unique(key, return_index=True, return_inverse=True)
    is_gpu = gpu[first]
    pid = [strings[cols["pid"][i]] for i in first.tolist()]
    tid = [strings[cols["tid"][i]] for i in first.tolist()]
    table = LaneTable(
        rank=np.zeros(len(keys), dtype=np.int32), is_gpu=is_gpu,
        device=np.where(is_gpu, dev[first], -1).astype(np.int32), stream=np.where(is_gpu, stream[first], -1),
        pid=tuple(pid), tid=tuple(tid),
        label=tuple(f"stream {stream[f]}" if g else labels.get((p, t), f"thread {t}")
                    for f, g, p, t in zip(first.tolist(), is_gpu.tolist(), pid, tid)),
    )
    return lane.astype(np.int32), table


def _fill_launch_flows(cols: dict[str, np.ndarray], interner: _Interner, ends: dict[tuple[str, str, float], int]) -> None:
    """GPU events written without a correlation arg take it from their ac2g flow finish."""
    corr = cols["correlation"]
    missing = np.flatnonzero((corr < 0) & np.isin(cols["kind"], (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)))
    s = interner.strings
    for i in missing.tolist():
        ts = cols["ts"][i]
        key = (s[cols["pid"][i]], s[cols["tid"][i]], int(ts) if cols["is_int_ts"][i] else float(ts))
        corr[i] = ends.get(key, -1)


def _flows(side: _Side, interner: _Interner, cols: dict[str, np.ndarray], lane: np.ndarray,
           base_ns: int) -> FlowTable:
    cpu = ~np.isin(cols["kind"], list(_GPU_SIDE))
    lane_of: dict[tuple[int, int], int] = {}
    for p, t, ln in zip(cols["pid"][cpu].tolist(), cols["tid"][cpu].tolist(), lane[cpu].tolist()):
        lane_of.setdefault((p, t), ln)
    ids = interner.ids
    rows = side.fwdbwd
    return FlowTable(
        rank=np.zeros(len(rows), dtype=np.int32),
        is_fwdbwd=np.ones(len(rows), dtype=bool),
        flow_id=np.array([r[0] for r in rows], dtype=np.int64),
        is_start=np.array([r[1] for r in rows], dtype=bool),
        lane=np.array([lane_of.get((ids.get(r[2], -1), ids.get(r[3], -1)), -1) for r in rows], dtype=np.int32),
        ts_ns=np.array([base_ns + round(float(r[4]) * 1000) for r in rows], dtype=np.int64),
    )


def parse_kineto(doc: DecodedFile, path: Path) -> RankPart:
    """Turns a decoded Kineto file into columns, decoding its events a chunk at a time.

    Args:
        doc (DecodedFile): the file with its events as raw JSON; they are released once decoded.
        path (Path): the file, for messages.

    Returns:
        RankPart: the usable events (possibly none); the others are counted in ``skipped``.

    Raises:
        TraceFormatError: ``baseTimeNanoseconds`` or ``distributedInfo`` out of range.
    """
    base_ns = doc.baseTimeNanoseconds or 0
    check_header(doc, path)
    total_events = len(doc.traceEvents or [])
    skipped: Counter[str] = Counter()
    cols, rows, side, interner = _decode_chunks(doc, base_ns, skipped)
    start = _start_ns(cols, doc, rows) + base_ns
    doc.traceEvents = None  # frees the raw JSON text: the rest works on columns
    dur = np.rint(cols["dur"] * 1000.0).astype(np.int64)
    lane, lanes = _lanes(cols, interner, side.labels)
    _fill_launch_flows(cols, interner, side.launch_flow_ends)
    table = EventTable(
        rank=np.zeros(len(start), dtype=np.int32), kind=cols["kind"], name=cols["name"], lane=lane,
        start_ns=start, dur_ns=dur, **{k: cols[k] for k in (
            "correlation", "external_id", "stream", "nbytes", "seq_number", "sync_kind", "wait_stream",
            "wait_record", "coll_name", "pg_name", "coll_seq", "comms_id", "nelems", "dtype", "group_size",
            "peer")},
    )
    table.stream[table.stream == _UINT32_MINUS_ONE] = -1
    ops = cols["pid"][cols["kind"] == EventKind.CPU_OP]
    dist = doc.distributedInfo
    marks = side.marks
    window = ((base_ns + round(min(marks) * 1000), base_ns + round(max(marks) * 1000)) if marks
              else (int(start.min()) if len(start) else base_ns, int((start + dur).max()) if len(start) else base_ns))
    return RankPart(
        path=path, events=table, lanes=lanes, flows=_flows(side, interner, cols, lane, base_ns),
        strings=interner.strings, dist_rank=dist.rank if dist else None,
        world_size=(dist.world_size if dist else None) or _world_from_groups(dist),
        backend=dist.backend if dist else None, base_ns=base_ns,
        devices=tuple(d.name for d in doc.deviceProperties or ()),
        process_groups=tuple(ProcessGroup(g.pg_name, g.pg_desc, g.backend_config, tuple(g.ranks))
                             for g in (dist.pg_config if dist else ())),
        window_ns=window, main_pid=interner.strings[int(np.bincount(ops).argmax())] if len(ops) else None,
        total_events=total_events, zero_duration=int((dur == 0).sum()), skipped=dict(skipped),
    )


def _world_from_groups(dist: object) -> int | None:
    groups = getattr(dist, "pg_config", None) or []
    sizes = [g.pg_size for g in groups if g.pg_desc == "default_pg"] or [g.pg_size for g in groups]
    sizes = [s for s in sizes if 0 < s < MAX_RANKS]
    return max(sizes) if sizes else None


RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
