"""Kineto (PyTorch profiler Chrome JSON) file → columns of one rank.

Times become integer ns: ``ts``/``dur`` are µs whatever ``displayTimeUnit``
says; with ``baseTimeNanoseconds`` absolute ns = base + ts·1000. Epoch-scale
float ``ts`` (~1.7e15 µs) lose their ns digits in float64, so those files are
re-read with the exact decimal text of every timestamp.
"""

from __future__ import annotations

import math
import re
from operator import attrgetter
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces._decode import DecodedFile, Event, decode_events, decode_exact_times
from bottleneck_oracle.traces.events import EventTable, FlowTable, LaneTable, ProcessGroup
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
_LAUNCH_FLOW_CATS = frozenset({"ac2g", "async_cpu_to_gpu"})
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


def _to_int(value: object) -> int:
    if type(value) is int:
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else -1
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 16) if text.lower().startswith("0x") else int(float(text))
        except ValueError:
            return -1
    return -1


def _int_column(values: list[object], dtype: type = np.int64) -> np.ndarray:
    """Integer column from JSON values that are ints, or now and then strings."""
    try:
        arr = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        arr = np.array([_to_int(v) for v in values], dtype=np.int64)
    return arr.astype(dtype, copy=False)


def _first_numel(raw: msgspec.Raw) -> int:
    """Elements of the first tensor in an ``Input Dims`` value ([[[136714]], [], ...] → 136714)."""
    if not len(raw):
        return -1
    stack: list[object] = [msgspec.json.decode(raw)]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            if item and all(type(x) is int for x in item):
                return math.prod(item)
            stack.extend(reversed(item))
    return -1


def _peer(raw: msgspec.Raw) -> int:
    """The peer rank of ``c10d::send``/``c10d::recv_``: its third concrete input ([tensors, group, peer, tag])."""
    if not len(raw):
        return -1
    values = msgspec.json.decode(raw)
    return _to_int(values[2]) if isinstance(values, list) and len(values) > 2 else -1


def _exact_us_to_ns(text: bytes | None) -> int:
    if text is None:
        return 0
    whole, dot, frac = text.partition(b".")
    if not dot or not frac.isdigit() or b"e" in whole.lower():
        return round(float(text) * 1000)
    digits = (frac + b"000")[:3]
    extra = frac[3:4]
    ns = int(whole) * 1000 + (int(digits) if not whole.startswith(b"-") else -int(digits))
    return ns + (1 if extra and extra >= b"5" else 0)


CHUNK_EVENTS = 16_384  # events decoded to Python objects at a time


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

    def __init__(self) -> None:
        self.labels: dict[tuple[str, str], str] = {}
        self.fwdbwd: list[tuple[int, bool, str, str, float]] = []
        self.launch_flow_ends: dict[tuple[str, str, float], int] = {}
        self.marks: list[float] = []

    def collect_launch_flows(self, events: list[Event]) -> None:
        """ac2g flow ends, for GPU events written without a correlation arg (rare: read only then)."""
        for e in events:
            if e.ph == "f" and e.cat in _LAUNCH_FLOW_CATS and e.id is not None and e.ts is not None:
                self.launch_flow_ends[(str(e.pid), str(e.tid), e.ts)] = _to_int(e.id)

    def collect(self, events: list[Event]) -> None:
        # ops, launch flows and memory instants are the bulk: only a few events matter here
        keep = [e for e in events if e.ph == "M" or e.cat == "fwdbwd" or e.cat == "Trace"
                or (e.cat is None and e.ph in ("i", "I"))]
        for e in keep:
            ph = e.ph
            if ph == "X":
                if e.cat == "Trace" and e.ts is not None:
                    self.marks += [e.ts, e.ts + (e.dur or 0)]
            elif ph == "M":
                if e.name == "thread_name" and isinstance(e.args.label, str):
                    key = (str(e.pid), str(e.tid))
                    # a tid can be named twice ("python", then "pt_gloo_runloop"): keep the specific one
                    if key not in self.labels or not e.args.label.endswith(_GENERIC_THREAD_NAMES):
                        self.labels[key] = e.args.label
            elif ph in ("s", "f") and e.id is not None and e.ts is not None:
                self.fwdbwd.append((_to_int(e.id), ph == "s", str(e.pid), str(e.tid), e.ts))
            elif ph in ("i", "I") and e.ts is not None and e.name and (
                e.name.startswith("Iteration Start") or e.name == "Record Window End"
            ):
                self.marks.append(e.ts)


_ATTRS = {name: attrgetter(name) for name in (
    "correlation", "external_id", "stream", "device", "nbytes", "seq_number", "wait_stream", "wait_record",
    "coll_seq", "group_size")}


def _chunk_columns(xs: list[Event], interner: _Interner) -> dict[str, np.ndarray]:
    """Columns of the complete events of one chunk (times still in the file's µs)."""
    args = [e.args for e in xs]
    names = [e.name or "" for e in xs]
    col = {k: _int_column(list(map(get, args))) for k, get in _ATTRS.items()}
    col["group_size"] = col["group_size"].astype(np.int32)
    is_comm = [n.startswith(_COMM_PREFIXES) for n in names]
    col["nelems"] = np.array([
        _to_int(a.in_nelems) if a.in_nelems != -1 else (_first_numel(a.input_dims) if c else -1)
        for a, c in zip(args, is_comm)], dtype=np.int64)
    col["comms_id"] = np.array([max(_to_int(a.comms_id), 0) for a in args], dtype=np.uint64)
    col["peer"] = np.array([_peer(a.concrete_inputs) if n.startswith(_P2P_CALLS) else -1
                            for a, n in zip(args, names)], dtype=np.int32)
    col["sync_kind"] = np.array([_SYNC_BY_NAME.get(a.sync_kind, 0) for a in args], dtype=np.int8)
    col["name"] = interner.column(names)
    col["coll_name"] = interner.column([a.coll_name for a in args])
    col["pg_name"] = interner.column([a.pg_name or (str(_to_int(a.pg_id)) if a.pg_id != -1 else "") for a in args])
    col["dtype"] = interner.column([a.dtype for a in args])
    kind_of = {c: _KIND_BY_CAT[c.lower()] for c in {e.cat for e in xs}}  # type: ignore[union-attr]
    col["kind"] = np.array([kind_of[e.cat] for e in xs], dtype=np.int8)
    col["pid"] = interner.column([str(e.pid) for e in xs])
    col["tid"] = interner.column([str(e.tid) for e in xs])
    col["ts"] = np.array([e.ts for e in xs], dtype=np.float64)  # µs ints < 2**53 stay exact; None → nan
    col["is_int_ts"] = np.array([type(e.ts) is int for e in xs], dtype=bool)
    col["dur"] = np.array([0 if e.dur is None else e.dur for e in xs], dtype=np.float64)
    return col


def _check(path: Path, events: list[Event], idx: list[int], offset: int, col: dict[str, np.ndarray]) -> None:
    """Every complete event needs a ``ts`` and a duration >= 0 (checked on the chunk's columns)."""
    bad = np.flatnonzero(np.isnan(col["ts"]) | (col["dur"] < 0))
    if len(bad):
        e = events[idx[bad[0]]]
        what = "has no 'ts'" if e.ts is None else f"has negative duration {e.dur:g} µs"
        raise TraceFormatError(f"{path.name}: event {offset + idx[bad[0]]} ('{e.name}') {what}")


def _decode_chunks(doc: DecodedFile, path: Path) -> tuple[dict[str, np.ndarray], np.ndarray, _Side, _Interner]:
    raws = doc.traceEvents or []
    interner, side = _Interner(), _Side()
    parts, rows = [], []
    for lo in range(0, len(raws), CHUNK_EVENTS):
        try:
            events = decode_events(raws[lo : lo + CHUNK_EVENTS])
        except msgspec.ValidationError as e:
            raise TraceFormatError(f"{path.name}: unexpected JSON content in events {lo}+: {e}") from e
        side.collect(events)
        cats = {c for c in {e.cat for e in events} if c and c.lower() in _KIND_BY_CAT}  # few distinct
        idx = [i for i, e in enumerate(events) if e.ph == "X" and e.cat in cats]
        parts.append(_chunk_columns([events[i] for i in idx], interner))
        _check(path, events, idx, lo, parts[-1])
        gpu = np.isin(parts[-1]["kind"], (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET))
        if (gpu & (parts[-1]["correlation"] < 0)).any():
            side.collect_launch_flows(events)
        rows.append(np.array(idx, dtype=np.int64) + lo)
        del events
    if not parts:
        parts.append(_chunk_columns([], interner))
    cols = {k: np.concatenate([p.pop(k) for p in parts]) for k in list(parts[0])}  # one column at a time
    return cols, np.concatenate(rows) if rows else np.zeros(0, np.int64), side, interner


def _start_ns(cols: dict[str, np.ndarray], doc: DecodedFile, rows: np.ndarray) -> np.ndarray:
    ts, is_int = cols["ts"], cols["is_int_ts"]
    start = np.where(is_int, ts.astype(np.int64) * 1000, np.rint(ts * 1000.0).astype(np.int64))
    if (~is_int & (np.abs(ts) >= _FLOAT_EXACT_LIMIT_US)).any():
        text = decode_exact_times(doc.traceEvents or [])
        start = np.array([_exact_us_to_ns(text[i]) for i in rows.tolist()], dtype=np.int64)
    return start


def _lanes(cols: dict[str, np.ndarray], interner: _Interner, labels: dict[tuple[str, str], str]):  # type: ignore[no-untyped-def]
    """Lane of every event: (pid, tid) for CPU events, (device, stream) for GPU-side ones."""
    strings = interner.strings
    as_int = np.array([_to_int(x) for x in strings], dtype=np.int64)
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

    Raises:
        TraceFormatError: an event without ``ts``, with a negative duration, or of a wrong type.
    """
    base_ns = doc.baseTimeNanoseconds or 0
    total_events = len(doc.traceEvents or [])
    cols, rows, side, interner = _decode_chunks(doc, path)
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
        total_events=total_events, zero_duration=int((dur == 0).sum()),
    )


def _world_from_groups(dist: object) -> int | None:
    groups = getattr(dist, "pg_config", None) or []
    sizes = [g.pg_size for g in groups if g.pg_desc == "default_pg"] or [g.pg_size for g in groups]
    return max(sizes) if sizes and max(sizes) > 0 else None


RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
