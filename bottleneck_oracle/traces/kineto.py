"""Kineto (PyTorch profiler Chrome JSON) file → columns of one rank.

Times become integer ns: ``ts``/``dur`` are µs whatever ``displayTimeUnit``
says; with ``baseTimeNanoseconds`` absolute ns = base + ts·1000. Epoch-scale
float ``ts`` (~1.7e15 µs) lose their ns digits in float64, so those files are
re-read with the exact decimal text of every timestamp.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces._decode import DecodedFile, Event, decode_exact_times
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
_LAUNCH_FLOW_CATS = frozenset({"ac2g", "async_cpu_to_gpu"})
_UINT32_MINUS_ONE = 4294967295
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


def _times_ns(path: Path, xs: list[Event], x_index: list[int], raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    for i, e in zip(x_index, xs):
        if e.ts is None:
            raise TraceFormatError(f"{path.name}: event {i} ('{e.name}') has no 'ts'")
    ts = np.array([e.ts for e in xs])
    dur = np.array([0 if e.dur is None else e.dur for e in xs], dtype=np.float64)
    if ts.dtype.kind == "f" and len(ts) and np.abs(ts).max() >= _FLOAT_EXACT_LIMIT_US:
        ts_text, _ = decode_exact_times(raw)
        start = np.array([_exact_us_to_ns(ts_text[i]) for i in x_index], dtype=np.int64)
    elif ts.dtype.kind == "f":
        start = np.rint(ts * 1000.0).astype(np.int64)
    else:
        start = ts.astype(np.int64) * 1000
    return start, np.rint(dur * 1000.0).astype(np.int64)


def _check_durations(path: Path, xs: list[Event], x_index: list[int], dur_ns: np.ndarray) -> None:
    bad = np.flatnonzero(dur_ns < 0)
    if len(bad):
        i = int(bad[0])
        raise TraceFormatError(
            f"{path.name}: event {x_index[i]} ('{xs[i].name}') has negative duration "
            f"{dur_ns[i] / 1000:g} µs"
        )


class _Interner:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {"": 0}
        self.strings: list[str] = [""]

    def column(self, values: list[str]) -> np.ndarray:
        ids = self.ids
        get = ids.get
        out = []
        for v in values:
            k = get(v)
            if k is None:
                k = ids[v] = len(self.strings)
                self.strings.append(v)
            out.append(k)
        return np.array(out, dtype=np.int32)


def _thread_labels(events: list[Event]) -> dict[tuple[str, str], str]:
    labels: dict[tuple[str, str], str] = {}
    for e in events:
        if e.ph == "M" and e.name == "thread_name" and isinstance(e.args.label, str):
            key = (str(e.pid), str(e.tid))
            # a tid can be named twice ("python", then "pt_gloo_runloop"): keep the last specific one
            if key not in labels or e.args.label not in ("python", "pt_main_thread"):
                labels[key] = e.args.label
    return labels


def _lanes(
    xs: list[Event], kinds: np.ndarray, labels: dict[tuple[str, str], str]
) -> tuple[np.ndarray, LaneTable]:
    keys: dict[tuple[object, ...], int] = {}
    lane_of = []
    for e, k in zip(xs, kinds.tolist()):
        if k in _GPU_SIDE:
            a = e.args
            dev = _to_int(a.device) if a.device != -1 else _to_int(e.pid)
            stream = _to_int(a.stream) if a.stream != -1 else _to_int(e.tid)
            if stream == _UINT32_MINUS_ONE:
                stream = -1
            key: tuple[object, ...] = (True, dev, stream, str(e.pid), str(e.tid))[:3]
        else:
            key = (False, str(e.pid), str(e.tid))
        lane = keys.get(key)
        if lane is None:
            lane = keys[key] = len(keys)
        lane_of.append(lane)
    order = list(keys)
    is_gpu = np.array([k[0] for k in order], dtype=bool)
    table = LaneTable(
        rank=np.zeros(len(order), dtype=np.int32),
        is_gpu=is_gpu,
        device=np.array([k[1] if k[0] else -1 for k in order], dtype=np.int32),
        stream=np.array([k[2] if k[0] else -1 for k in order], dtype=np.int64),
        pid=tuple(str(k[1]) for k in order),
        tid=tuple(str(k[2]) for k in order),
        label=tuple(
            f"stream {k[2]}" if k[0] else labels.get((str(k[1]), str(k[2])), f"thread {k[2]}")
            for k in order
        ),
    )
    return np.array(lane_of, dtype=np.int32), table


def _arg_columns(xs: list[Event], names: list[str], interner: _Interner) -> dict[str, np.ndarray]:
    args = [e.args for e in xs]
    stream = _int_column([a.stream for a in args])
    stream[stream == _UINT32_MINUS_ONE] = -1
    is_comm = [n.startswith(_COMM_PREFIXES) for n in names]
    nelems = [
        _to_int(a.in_nelems) if a.in_nelems != -1 else (_first_numel(a.input_dims) if c else -1)
        for a, c in zip(args, is_comm)
    ]
    pg_names = [a.pg_name or (str(_to_int(a.pg_id)) if a.pg_id != -1 else "") for a in args]
    comms = [_to_int(a.comms_id) for a in args]
    return {
        "correlation": _int_column([a.correlation for a in args]),
        "external_id": _int_column([a.external_id for a in args]),
        "stream": stream,
        "nbytes": _int_column([a.nbytes for a in args]),
        "seq_number": _int_column([a.seq_number for a in args]),
        "sync_kind": np.array([_SYNC_BY_NAME.get(a.sync_kind, 0) for a in args], dtype=np.int8),
        "wait_stream": _int_column([a.wait_stream for a in args]),
        "wait_record": _int_column([a.wait_record for a in args]),
        "coll_name": interner.column([a.coll_name for a in args]),
        "pg_name": interner.column(pg_names),
        "coll_seq": _int_column([a.coll_seq for a in args]),
        "comms_id": np.array([c if c > 0 else 0 for c in comms], dtype=np.uint64),
        "nelems": np.array(nelems, dtype=np.int64),
        "dtype": interner.column([a.dtype for a in args]),
        "group_size": _int_column([a.group_size for a in args], np.int32),
    }


def _flows(events: list[Event], lane_keys: dict[tuple[str, str], int], base_ns: int) -> FlowTable:
    rows = [
        e for e in events
        if e.ph in ("s", "f") and e.cat == "fwdbwd" and e.id is not None and e.ts is not None
    ]
    return FlowTable(
        rank=np.zeros(len(rows), dtype=np.int32),
        is_fwdbwd=np.ones(len(rows), dtype=bool),
        flow_id=_int_column([e.id for e in rows]),
        is_start=np.array([e.ph == "s" for e in rows], dtype=bool),
        lane=np.array([lane_keys.get((str(e.pid), str(e.tid)), -1) for e in rows], dtype=np.int32),
        ts_ns=np.array([base_ns + round(float(e.ts) * 1000) for e in rows], dtype=np.int64),
    )


def _fill_launch_flows(events: list[Event], xs: list[Event], kinds: np.ndarray, corr: np.ndarray) -> None:
    """GPU events written without a correlation arg take it from their ac2g flow finish."""
    missing = np.flatnonzero((corr < 0) & np.isin(kinds, (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)))
    if not len(missing):
        return
    ends = {
        (str(e.pid), str(e.tid), e.ts): _to_int(e.id)
        for e in events
        if e.ph == "f" and e.cat in _LAUNCH_FLOW_CATS and e.id is not None
    }
    for i in missing.tolist():
        e = xs[i]
        corr[i] = ends.get((str(e.pid), str(e.tid), e.ts), -1)


def _window(events: list[Event], start: np.ndarray, end: np.ndarray, base_ns: int) -> tuple[int, int]:
    marks = []
    for e in events:
        if e.cat == "Trace" and e.ph == "X" and e.ts is not None:
            marks += [e.ts, e.ts + (e.dur or 0)]
        elif e.ph in ("i", "I") and e.ts is not None and e.name and (
            e.name.startswith("Iteration Start") or e.name == "Record Window End"
        ):
            marks.append(e.ts)
    if marks:  # the profiler's own window: spans that run past it are bogus (TRACE-NOTES 7)
        return base_ns + round(min(marks) * 1000), base_ns + round(max(marks) * 1000)
    lo = int(start.min()) if len(start) else base_ns
    hi = int(end.max()) if len(end) else base_ns
    return lo, hi


def _main_pid(xs: list[Event], kinds: np.ndarray) -> str | None:
    counts: dict[str, int] = {}
    for e, k in zip(xs, kinds.tolist()):
        if k == EventKind.CPU_OP:
            counts[str(e.pid)] = counts.get(str(e.pid), 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


def parse_kineto(doc: DecodedFile, path: Path, raw: bytes) -> RankPart:
    """Turns a decoded Kineto file into columns.

    Args:
        doc (DecodedFile): the decoded JSON.
        path (Path): the file, for messages.
        raw (bytes): the JSON text, re-read for exact epoch timestamps.

    Raises:
        TraceFormatError: an event without ``ts`` or with a negative duration.
    """
    events = doc.traceEvents or []
    base_ns = doc.baseTimeNanoseconds or 0
    x_index = [i for i, e in enumerate(events) if e.ph == "X" and (e.cat or "").lower() in _KIND_BY_CAT]
    xs = [events[i] for i in x_index]
    kinds = np.array([_KIND_BY_CAT[e.cat.lower()] for e in xs], dtype=np.int8)  # type: ignore[union-attr]
    start, dur = _times_ns(path, xs, x_index, raw)
    _check_durations(path, xs, x_index, dur)
    start += base_ns
    interner = _Interner()
    names = [e.name or "" for e in xs]
    name_ids = interner.column(names)
    labels = _thread_labels(events)
    lane_of, lanes = _lanes(xs, kinds, labels)
    cpu_lane_keys = {(lanes.pid[i], lanes.tid[i]): i for i in range(len(lanes)) if not lanes.is_gpu[i]}
    cols = _arg_columns(xs, names, interner)
    _fill_launch_flows(events, xs, kinds, cols["correlation"])
    table = EventTable(
        rank=np.zeros(len(xs), dtype=np.int32), kind=kinds, name=name_ids, lane=lane_of,
        start_ns=start, dur_ns=dur, **cols,
    )
    dist = doc.distributedInfo
    return RankPart(
        path=path,
        events=table,
        lanes=lanes,
        flows=_flows(events, cpu_lane_keys, base_ns),
        strings=interner.strings,
        dist_rank=dist.rank if dist else None,
        world_size=(dist.world_size if dist else None) or _world_from_groups(dist),
        backend=dist.backend if dist else None,
        base_ns=base_ns,
        devices=tuple(d.name for d in doc.deviceProperties or ()),
        process_groups=tuple(
            ProcessGroup(g.pg_name, g.pg_desc, g.backend_config, tuple(g.ranks))
            for g in (dist.pg_config if dist else ())
        ),
        window_ns=_window(events, start, start + dur, base_ns),
        main_pid=_main_pid(xs, kinds),
        total_events=len(events),
        zero_duration=int((dur == 0).sum()),
    )


def _world_from_groups(dist: object) -> int | None:
    groups = getattr(dist, "pg_config", None) or []
    sizes = [g.pg_size for g in groups if g.pg_desc == "default_pg"] or [g.pg_size for g in groups]
    return max(sizes) if sizes and max(sizes) > 0 else None


RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
