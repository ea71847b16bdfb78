"""Read one trace file, a folder of per-rank files, or several paths into one ``Trace``.

Rank files are parsed in parallel, in local processes or as Ray tasks (``executor.py``); each
returns numpy columns, so no per-event Python object crosses a process boundary or outlives its parse.
"""

from __future__ import annotations

import logging
import re
import socket
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.executor import Executor, LocalExecutor
from bottleneck_oracle.heap import release_free_heap
from bottleneck_oracle.traces._decode import DecodedFile, decode_file
from bottleneck_oracle.traces._validate import summary
from bottleneck_oracle.traces.events import EventTable, FlowTable, LaneTable, RankInfo, Trace
from bottleneck_oracle.traces.execution_trace import align_with_kineto, data_dependencies, read_execution_trace
from bottleneck_oracle.traces.kineto import RANK_IN_NAME, RankPart, parse_kineto
from bottleneck_oracle.traces.types import EventKind

__all__ = ["check_ranks", "one_rank", "read_rank", "read_trace", "trace_files"]

log = logging.getLogger(__name__)

_SUFFIXES = (".json", ".json.gz")
_TRAILING_NUMBER = re.compile(r"_(\d+)\.json")  # dlrm_eg_3.json.gz → rank 3


def trace_files(paths: Sequence[Path]) -> list[tuple[Path, bool]]:
    """Expands folders into the ``*.json`` / ``*.json.gz`` files they hold, sorted.

    Returns:
        ``(file, named)`` pairs; ``named`` is false for files found in a folder,
        which may be other JSON (a manifest) and are then skipped.

    Raises:
        TraceFormatError: a path does not exist or a folder holds no trace file.
    """
    files: list[tuple[Path, bool]] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_SUFFIXES))
            if not found:
                raise TraceFormatError(f"{path}: folder holds no .json or .json.gz trace file")
            files += [(p, False) for p in found]
        elif path.is_file():
            files.append((path, True))
        else:
            raise TraceFormatError(f"{path}: no such file or folder")
    return files


def _gunzip(data: bytes) -> bytearray:
    """Decompresses into one buffer sized from the gzip trailer, 4 MiB at a time, so the
    peak memory is the output alone (``gzip.decompress`` needs about twice that)."""
    out = bytearray(int.from_bytes(data[-4:], "little"))  # ISIZE: size mod 2**32, a first guess
    filled, rest = 0, data
    while rest:
        unzip = zlib.decompressobj(wbits=31)
        pending = rest
        while pending and not unzip.eof:
            piece = unzip.decompress(pending, 1 << 22)
            pending = unzip.unconsumed_tail
            if filled + len(piece) > len(out):
                out.extend(bytes(filled + len(piece) - len(out)))
            out[filled : filled + len(piece)] = piece
            filled += len(piece)
        if not unzip.eof:
            raise EOFError("compressed stream ended early")
        rest = unzip.unused_data.lstrip(b"\x00")  # another gzip member may follow
    del out[filled:]
    return out


def _read_bytes(location: Path) -> bytes | bytearray:
    try:
        data = location.read_bytes()
    except OSError as e:  # listed on the driver, gone or not mounted where the task ran
        raise TraceFormatError(f"{location}: cannot be read on {socket.gethostname()} ({e.strerror or e})") from None
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return _gunzip(data)
    except (EOFError, zlib.error) as e:
        raise TraceFormatError(f"{location.name}: truncated or corrupt gzip ({e})") from e


def _decode(path: Path, raw: bytes | bytearray, skipped: Counter[str]) -> DecodedFile:
    try:
        return decode_file(raw, skipped)
    except msgspec.ValidationError as e:
        raise TraceFormatError(f"{path.name}: unexpected JSON content: {e}") from e
    except msgspec.DecodeError as e:
        what = "truncated JSON" if "truncated" in str(e).lower() else f"not valid JSON ({e})"
        raise TraceFormatError(f"{path.name}: {what}") from e


EtFile = tuple[Path, DecodedFile, Counter[str]]  # an execution trace and its nodes left out, by reason
Parsed = RankPart | EtFile | None


def _parse_file(item: tuple[Path, bool, Path]) -> Parsed:
    """One file as the user named it (``path``), read at ``location``, its absolute path."""
    path, named, location = item
    raw = _read_bytes(location)
    skipped: Counter[str] = Counter()
    doc = _decode(path, raw, skipped)
    del raw  # the events keep the buffer alive only until parse_kineto has decoded them
    if doc.traceEvents is not None:
        return parse_kineto(doc, path)
    if doc.nodes is not None:
        return path, doc, skipped  # an execution trace: linked once ranks are known
    if not named:
        log.info("%s: not a trace, skipped", path.name)
        return None
    raise TraceFormatError(
        f"{path.name}: neither a profiler trace (no 'traceEvents') nor an execution trace (no 'nodes')"
    )


def _rank_of(part: RankPart, alone: bool) -> tuple[int, str]:
    """The rank a file holds and where that was read (``alone``: the job's only file)."""
    if part.dist_rank is not None:
        return part.dist_rank, "distributedInfo"
    if m := RANK_IN_NAME.search(part.path.name):
        return int(m.group(1)), "file name"
    if alone:
        return 0, "single file"
    raise _no_rank(part.path)


def _no_rank(path: Path) -> TraceFormatError:
    return TraceFormatError(f"{path.name}: no distributedInfo and no rank in the file name; cannot tell which rank it holds")


def check_ranks(ranks: Sequence[tuple[int, Path, int | None]], partial: bool) -> None:
    """Raises unless every rank of ``(rank, file, world size)`` is held by one file, and, unless ``partial``,
    every rank of the world size is there."""
    seen: dict[int, Path] = {}
    for rank, path, _ in ranks:
        if rank in seen:
            raise TraceFormatError(f"{seen[rank].name} and {path.name} both claim rank {rank}")
        seen[rank] = path
    world = max((w or 0 for _, _, w in ranks), default=0)
    missing = sorted(set(range(world)) - set(seen))
    if len(ranks) > 1 and missing and not partial:
        shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
        raise TraceFormatError(
            f"{ranks[0][1].parent}: world size {world} but rank(s) {shown} are missing "
            "(pass --partial to analyze the ranks given)"
        )


def _resolve_ranks(parts: list[RankPart], partial: bool) -> list[tuple[int, str, RankPart]]:
    ranked = [(*_rank_of(part, len(parts) == 1), part) for part in parts]
    check_ranks([(rank, part.path, part.world_size) for rank, _, part in ranked], partial)
    return sorted(ranked, key=lambda r: r[0])


def read_rank(path: Path, named: bool) -> tuple[int, Path, int | None, Trace | None] | None:
    """One rank's file as a trace of that rank alone: ``(rank, file, world size, trace)``, the trace None when
    no event of it was usable, the rank -1 when the file does not say it (``one_rank`` says what that means);
    None for a file that holds no rank (an execution trace, other JSON in a folder, unless ``named``). The
    trace's times run from its own first event (``Trace.origin_ns``)."""
    part = _parse_file((path, named, path.absolute()))
    if not isinstance(part, RankPart):
        if part is not None:
            log.info("%s: an execution trace adds no timings to a scan, skipped", path.name)
        return None
    rank, source = _rank_of(part, alone=True)
    said = -1 if source == "single file" else rank
    if not len(part.events):
        log.warning(_nothing_usable(part))
        return said, path, part.world_size, None
    trace = _merge([(rank, source, part)])
    release_free_heap()
    return said, path, part.world_size, trace


def one_rank(ranks: list[tuple[int, Path, int | None]]) -> list[tuple[int, Path, int | None]]:
    """The ranks ``read_rank`` read, the one of a file that does not say it taken as 0 when it is the job's only
    file, as ``read_trace`` takes it.

    Raises:
        TraceFormatError: a file of several does not say its rank.
    """
    for rank, path, _ in ranks:
        if rank < 0 and len(ranks) > 1:
            raise _no_rank(path)
    return [(max(rank, 0), path, world) for rank, path, world in ranks]


def _merge(ranked: list[tuple[int, str, RankPart]]) -> Trace:
    strings: dict[str, int] = {}
    tables, lanes, flows, infos = [], [], [], []
    lane_offset = 0
    # a rank left without events (all skipped, or metadata only) has no time of its own
    origin = min(p.window_ns[0] for _, _, p in ranked if len(p.events))
    for rank, source, part in ranked:
        remap = np.array([strings.setdefault(s, len(strings)) for s in part.strings], dtype=np.int32)
        ev = part.events
        tables.append(EventTable(**{
            **{f: getattr(ev, f) for f in EventTable.__dataclass_fields__},
            "rank": np.full(len(ev), rank, dtype=np.int32),
            "name": remap[ev.name], "coll_name": remap[ev.coll_name],
            "pg_name": remap[ev.pg_name], "dtype": remap[ev.dtype],
            "lane": ev.lane + lane_offset, "start_ns": ev.start_ns - origin,
        }))
        lanes.append(part.lanes)
        fl = part.flows
        flows.append(FlowTable(
            rank=np.full(len(fl), rank, dtype=np.int32), is_fwdbwd=fl.is_fwdbwd, flow_id=fl.flow_id,
            is_start=fl.is_start, lane=np.where(fl.lane >= 0, fl.lane + lane_offset, -1),
            ts_ns=fl.ts_ns - origin,
        ))
        lane_offset += len(part.lanes)
        infos.append(RankInfo(
            rank=rank, path=part.path, rank_source=source, world_size=part.world_size,
            backend=part.backend, base_ns=part.base_ns, devices=part.devices,
            process_groups=part.process_groups, window_start_ns=part.window_ns[0] - origin,
            window_end_ns=part.window_ns[1] - origin, events=part.total_events,
            zero_duration=part.zero_duration, skipped_events=part.skipped,
        ))
    lane_table = LaneTable(
        rank=np.concatenate([np.full(len(ln), r, dtype=np.int32) for (r, _, _), ln in zip(ranked, lanes)]),
        is_gpu=np.concatenate([ln.is_gpu for ln in lanes]),
        device=np.concatenate([ln.device for ln in lanes]),
        stream=np.concatenate([ln.stream for ln in lanes]),
        pid=sum((ln.pid for ln in lanes), ()), tid=sum((ln.tid for ln in lanes), ()),
        label=sum((ln.label for ln in lanes), ()),
    )
    return Trace(
        events=EventTable.concat(tables), lanes=lane_table, flows=FlowTable.concat(flows),
        strings=tuple(strings), ranks=tuple(infos), origin_ns=origin,
        data_deps=np.zeros((0, 2), dtype=np.int64),
        skipped_events=dict(sum((Counter(p.skipped) for _, _, p in ranked), Counter())),
    )


def _pair_execution_trace(path: Path, doc: DecodedFile, ranked: list[tuple[int, str, RankPart]]) -> int:
    by_pid = [r for r, _, p in ranked if doc.pid is not None and p.main_pid == str(doc.pid)]
    if len(by_pid) == 1:
        return by_pid[0]
    m = RANK_IN_NAME.search(path.name) or _TRAILING_NUMBER.search(path.name)
    if m is not None and any(r == int(m.group(1)) for r, _, _ in ranked):
        return int(m.group(1))
    if len(ranked) == 1:
        return ranked[0][0]
    raise TraceFormatError(
        f"{path.name}: an execution trace holds no timings and matches no Kineto trace "
        "(by process id or by rank in the file name)"
    )


def _link_one(trace: Trace, path: Path, doc: DecodedFile, skipped: Counter[str], rank: int) -> np.ndarray:
    """Data dependencies of one execution trace as (producer, consumer) event rows."""
    ev = trace.events
    et = read_execution_trace(doc, path, skipped)
    ops = np.flatnonzero((ev.rank == rank) & np.isin(ev.kind, (EventKind.CPU_OP, EventKind.ANNOTATION)))
    names = [trace.strings[i] for i in ev.name[ops].tolist()]
    rf, pos = align_with_kineto(et, names, ev.lane[ops], ev.external_id[ops])
    deps = data_dependencies(doc)
    order = np.argsort(rf)
    keys, rows = rf[order], ops[pos[order]]
    if not len(keys):
        return np.zeros((0, 2), dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, deps), len(keys) - 1)
    found = (keys[at] == deps).all(axis=1)
    log.info("%s: %d of %d ops and %d of %d data dependencies linked to rank %d",
             path.name, len(rf), int((et.rf_id > 0).sum()), int(found.sum()), len(deps), rank)
    return rows[at[found]]


def _link_execution_traces(trace: Trace, ets: list[EtFile], ranked: list[tuple[int, str, RankPart]]) -> Trace:
    pairs = [_link_one(trace, path, doc, skipped, _pair_execution_trace(path, doc, ranked))
             for path, doc, skipped in ets]
    deps_rows = np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)
    skipped = sum((skipped for _, _, skipped in ets), Counter(trace.skipped_events))
    return Trace(**{**{f: getattr(trace, f) for f in Trace.__dataclass_fields__}, "data_deps": deps_rows,
                    "skipped_events": dict(skipped)})


def _nothing_usable(part: RankPart) -> str:
    if not part.total_events:
        return f"{part.path.name}: holds no events"
    if part.skipped:
        n = sum(part.skipped.values())
        return (f"{part.path.name}: no usable events; {n} of {part.total_events} skipped "
                f"({summary(part.skipped.items())})")
    return f"{part.path.name}: no usable events: no complete ('ph' X) event of a known 'cat'"


def read_trace(paths: Sequence[Path] | Path, *, workers: int = 1, partial: bool = False,
               executor: Executor | None = None) -> Trace:
    """Reads Kineto traces (and PyTorch execution traces beside them) into one ``Trace``.

    Args:
        paths: a file, a folder of per-rank files, or several of either.
        workers (int): processes that parse files in parallel. (default: ``1``)
        executor (Executor | None): where the files are parsed, one task per file; the result is
            the same wherever. (default: ``LocalExecutor(workers)``)
        partial (bool): accept a job whose files miss some ranks. (default: ``False``)

    An event with a malformed or out-of-range field is left out and counted in
    ``Trace.skipped_events``; a rank file left with no usable event is an empty rank.

    Raises:
        TraceFormatError: a file is unreadable or not a trace, no file holds a
            usable event, two files claim one rank, ranks are missing, or an
            execution trace pairs with no rank.
    """
    files = trace_files([paths] if isinstance(paths, (str, Path)) else paths)
    trace = _read(files, executor or LocalExecutor(workers), partial)
    release_free_heap()  # of the per-rank columns, merged and freed (``heap.py``)
    return trace


def _read(files: list[tuple[Path, bool]], executor: Executor, partial: bool) -> Trace:
    # read at absolute paths: a Ray task runs in another working directory, maybe on another node
    parsed = executor.map(_parse_file, [(p, named, p.absolute()) for p, named in files])
    kineto = [p for p in parsed if isinstance(p, RankPart)]
    ets = [p for p in parsed if isinstance(p, tuple)]
    if not kineto:
        what = "an execution trace holds no timings; pass it with its Kineto trace" if ets else "no trace in it"
        raise TraceFormatError(f"{(ets[0][0] if ets else files[0][0]).name}: {what}")
    if not any(len(p.events) for p in kineto):
        raise TraceFormatError(_nothing_usable(kineto[0]))
    ranked = _resolve_ranks(kineto, partial)
    trace = _merge(ranked)
    return _link_execution_traces(trace, ets, ranked) if ets else trace
