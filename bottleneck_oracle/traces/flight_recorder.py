"""Read PyTorch Flight Recorder dumps: one file per rank, each rank's last collectives.

A dump is a pickle (or, from ``_dump_fr_trace_json``, JSON) that torch writes when a collective times
out. A pickle can run code while it loads, so it is read by an unpickler that admits plain containers
and scalars and nothing else: a file that names any class or function is refused, and nothing in it
runs. The readers accept what torch 2.4 to 2.13 write (format versions 2.2 to 2.10): fields a version
lacks are left empty rather than guessed.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.executor import Executor, LocalExecutor
from bottleneck_oracle.traces.events import ProcessGroup

__all__ = ["DumpEntry", "FlightRecord", "GroupStatus", "RankDump", "read_flight_record"]

_RANK_AT_END = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?P<suffix>\.json|\.pkl|\.pickle)?$")
_TORCH_FRAME = re.compile(r"(^|/)(torch|site-packages/torch|dist-packages/torch)/|^<")
_P2P_OPS = ("send", "recv")
_TORCH_PREFIX = "nccl_trace_rank_"  # TORCH_FR_DUMP_TEMP_FILE's default


class _Refused(pickle.UnpicklingError):
    """The file names code or an outside object: never loaded."""


class _PlainUnpickler(pickle.Unpickler):
    """Loads dicts, lists, tuples, sets, strings, numbers, bytes, booleans and None; refuses every class and
    function, so no code in the file can run (``find_class`` is the only door to one)."""

    def find_class(self, module: str, name: str) -> object:
        raise _Refused(f"it names {module}.{name}, and a Flight Recorder dump names no code")

    def persistent_load(self, pid: object) -> object:
        raise _Refused("it refers to a persistent object, and a Flight Recorder dump has none")


class UnsafeDumpError(TraceFormatError):
    """A dump would run code (or build an object) when loaded: refused, nothing in it ran."""


@dataclass(frozen=True, slots=True)
class DumpEntry:
    """One collective or point-to-point call a rank recorded."""

    group: str  # the process group's name, as the rank's dump gives it
    group_desc: str  # its description ("default_pg", "dp_replicate"...)
    seq: int  # collective sequence number in the group (for p2p: the p2p sequence number)
    is_p2p: bool
    op: str  # "all_reduce", "broadcast", "send"... (the backend prefix dropped)
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    state: str  # scheduled, started or completed, as the backend saw it
    retired: bool  # the call finished and left the recorder's active set
    created_ns: int
    where: str  # the first frame of the call stack outside torch, "file:line" ("" when not recorded)
    label: str  # the recorder's profiling name, whole ("nccl:send 0->1")
    record: int  # the rank's running count of recorded calls, over all its groups: its program order
    op_id: int  # the group's running count of every call, recorded or not (-1: not in this version)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """A rank's counters for one process group: the last collective it enqueued, started and completed."""

    enqueued: int
    started: int
    completed: int


@dataclass(frozen=True, slots=True)
class RankDump:
    """One rank's dump: its entries, its counters per group, and the groups its config names."""

    rank: int
    path: Path
    version: str
    entries: tuple[DumpEntry, ...]
    status: Mapping[str, GroupStatus]  # by group name; empty where the version records none
    groups: Mapping[str, ProcessGroup]


@dataclass(frozen=True)
class FlightRecord:
    """The dumps of one job: by rank, the files that could not be read, and the ranks that left none."""

    folder: Path
    dumps: Mapping[int, RankDump]
    skipped: tuple[tuple[Path, str], ...] = ()
    missing_ranks: tuple[int, ...] = ()
    groups: Mapping[str, ProcessGroup] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        return max([*self.dumps, *self.missing_ranks, -1]) + 1

    def calls(self, rank: int, group: str) -> tuple[DumpEntry, ...]:
        """The rank's entries in the group, in the order it recorded them (indexed once, read many times)."""
        return self._by_group.get((rank, group), ())

    @cached_property
    def _by_group(self) -> dict[tuple[int, str], tuple[DumpEntry, ...]]:
        index: dict[tuple[int, str], list[DumpEntry]] = {}
        for rank, dump in self.dumps.items():
            for entry in dump.entries:
                index.setdefault((rank, entry.group), []).append(entry)
        return {key: tuple(entries) for key, entries in index.items()}


def read_flight_record(path: Path, prefix: str | None = None, executor: Executor | None = None) -> FlightRecord:
    """Reads every rank's dump in ``path`` (a folder, or one file of it), the files in parallel on ``executor``.

    Files are matched by a common prefix followed by the rank (``nccl_trace_rank_3``, ``..._3.json``);
    without ``prefix`` the most common one in the folder is taken. A truncated or foreign file is skipped
    and named; the ranks of the job (from the process groups' members) with no dump are listed.

    Raises:
        TraceFormatError: no such path, no readable dump, or a dump that would run code when loaded.
    """
    path = Path(path)
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file or folder")
    folder = path if path.is_dir() else path.parent
    candidates = _rank_files(folder, prefix) if path.is_dir() else _rank_files(folder, _prefix_of(path))
    if not candidates:
        raise TraceFormatError(f"{folder}: no Flight Recorder dump (files named PREFIX<rank>, such as "
                               "nccl_trace_rank_0)" + (f" with prefix {prefix!r}" if prefix else ""))
    dumps: dict[int, RankDump] = {}
    skipped: list[tuple[Path, str]] = []
    for (rank, file), read in zip(candidates, (executor or LocalExecutor()).map(_read_or_why, candidates)):
        if isinstance(read, RankDump):
            dumps[rank] = read
        else:
            skipped.append((file, read))
    if not dumps:
        reasons = "; ".join(f"{f.name}: {why}" for f, why in skipped)
        raise TraceFormatError(f"{folder}: no readable Flight Recorder dump ({reasons})")
    groups = _merged_groups(list(dumps.values()))
    members = {r for g in groups.values() for r in g.ranks}
    missing = tuple(sorted(members - set(dumps)))
    return FlightRecord(folder, dict(sorted(dumps.items())), tuple(skipped), missing, groups)


def _prefix_of(file: Path) -> str:
    match = _RANK_AT_END.match(file.name)
    if match is None:
        raise TraceFormatError(f"{file}: a Flight Recorder dump is named PREFIX<rank> (nccl_trace_rank_0)")
    return match["prefix"]


def _rank_files(folder: Path, prefix: str | None) -> list[tuple[int, Path]]:
    named: dict[str, list[tuple[int, Path]]] = {}
    for file in sorted(p for p in folder.iterdir() if p.is_file()):
        match = _RANK_AT_END.match(file.name)
        if match and match["prefix"] and (prefix is None or match["prefix"] == prefix):
            named.setdefault(match["prefix"], []).append((int(match["rank"]), file))
    if not named:
        return []
    counts = Counter({p: len(files) for p, files in named.items()}).most_common()
    tied = [p for p, n in counts if n == counts[0][1]]
    if len(tied) > 1:
        if _TORCH_PREFIX not in tied:
            raise TraceFormatError(f"{folder}: dumps with several prefixes ({', '.join(sorted(tied))}): "
                                   "name one with --prefix")
        return sorted(named[_TORCH_PREFIX])
    return sorted(named[counts[0][0]])


def _read_or_why(rank_file: tuple[int, Path]) -> RankDump | str:
    """A rank's dump, or why it cannot be read (a dump that would run code stops everything)."""
    rank, file = rank_file
    try:
        return _read_dump(rank, file)
    except UnsafeDumpError:
        raise
    except TraceFormatError as error:
        return str(error).removeprefix(f"{file}: ")


def _read_dump(rank: int, file: Path) -> RankDump:
    data = file.read_bytes()
    if not data:
        raise TraceFormatError(f"{file}: empty file")
    raw = _load_json(file, data) if data.lstrip()[:1] == b"{" else _load_pickle(file, data)
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise TraceFormatError(f"{file}: not a Flight Recorder dump (no list of entries)")
    try:
        version = str(raw.get("version", ""))
        raw_entries = [e for e in raw["entries"] if isinstance(e, dict)]
        entries = tuple(_entry(e) for e in raw_entries)
        # pg_status is keyed by the group's index in this process (pg_id), entries name it: a subgroup may be
        # index 1 on one rank and named "2" job-wide
        names = {str(e.get("pg_id")): entry.group for e, entry in zip(raw_entries, entries) if "pg_id" in e}
        status = {names.get(str(key), str(key)): _status(s) for key, s in (raw.get("pg_status") or {}).items()
                  if isinstance(s, dict)}
        groups = _groups(raw.get("pg_config") or {})
    except (TypeError, ValueError, KeyError) as error:
        raise TraceFormatError(f"{file}: a Flight Recorder entry is malformed ({error})") from error
    return RankDump(rank, file, version, entries, status, groups)


def _load_pickle(file: Path, data: bytes) -> object:
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as error:
        raise UnsafeDumpError(f"{file}: refused: {error}; nothing in it was run") from error
    except pickle.UnpicklingError as error:
        raise TraceFormatError(f"{file}: not a readable pickle ({error})") from error
    except (EOFError, ValueError, IndexError, KeyError, TypeError, MemoryError) as error:
        raise TraceFormatError(f"{file}: truncated or not a pickle ({type(error).__name__}: {error})") from error


def _load_json(file: Path, data: bytes) -> object:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"{file}: truncated or not JSON ({error})") from error


def _entry(raw: dict) -> DumpEntry:
    label = str(raw.get("profiling_name", ""))
    op = label.split(":", 1)[-1].split(" ", 1)[0]
    is_p2p = bool(raw["is_p2p"]) if "is_p2p" in raw else op.startswith(_P2P_OPS)
    seq_key = "p2p_seq_id" if is_p2p else "collective_seq_id"
    seq = raw.get(seq_key, raw.get("seq_id", -1))
    group = raw.get("process_group", ("", ""))
    group = tuple(group) if isinstance(group, (list, tuple)) else (group, "")
    dtypes = tuple(str(d) for d in (raw.get("input_dtypes") or ()))
    return DumpEntry(
        group=str(group[0]), group_desc=str(group[1]) if len(group) > 1 else "", seq=int(seq), is_p2p=is_p2p, op=op,
        input_sizes=_sizes(raw.get("input_sizes")), output_sizes=_sizes(raw.get("output_sizes")), dtypes=dtypes,
        state=str(raw.get("state", "")), retired=bool(raw.get("retired", False)),
        created_ns=int(raw.get("time_created_ns") or 0), where=_user_frame(raw.get("frames") or ()), label=label,
        record=int(raw.get("record_id", -1)), op_id=int(raw.get("op_id", -1)))


def _sizes(raw: object) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(d) for d in shape) for shape in raw) if isinstance(raw, (list, tuple)) else ()


def _user_frame(frames: object) -> str:
    """The first frame of the stack outside torch and the interpreter: the line of the job that made the call."""
    for frame in frames if isinstance(frames, (list, tuple)) else ():
        name = str(frame.get("filename", "")) if isinstance(frame, dict) else ""
        if name and not _TORCH_FRAME.search(name):
            return f"{name}:{frame.get('line', '?')}"
    return ""


def _status(raw: dict) -> GroupStatus:
    def counter(key: str) -> int:
        return int(raw.get(key, -1))  # JSON dumps write the counters as strings

    return GroupStatus(counter("last_enqueued_collective"), counter("last_started_collective"),
                       counter("last_completed_collective"))


def _groups(raw: dict) -> dict[str, ProcessGroup]:
    groups = {}
    for name, config in raw.items():
        config = config if isinstance(config, dict) else {"desc": config}
        ranks = config.get("ranks", ())
        if isinstance(ranks, str):  # "[0, 1, 2, 3]"
            ranks = [int(r) for r in re.findall(r"-?\d+", ranks)]
        members = tuple(sorted(int(r) for r in ranks))
        groups[str(name)] = ProcessGroup(str(name), str(config.get("desc", "")), "", members)
    return groups


def _merged_groups(dumps: list[RankDump]) -> dict[str, ProcessGroup]:
    """The job's process groups, by the name its entries use.

    gloo jobs of torch 2.13 write the default group's config under an empty name while their entries call it
    "0" (torch's own analyzer stops there with a KeyError): the group described as the default one takes
    that config. A group no config names takes the ranks whose entries use it.
    """
    configs: dict[str, ProcessGroup] = {}
    for dump in dumps:
        for name, config in dump.groups.items():
            if len(config.ranks) >= len(configs.get(name, config).ranks):
                configs[name] = config
    users: dict[str, set[int]] = {}
    descs: dict[str, str] = {}
    for dump in dumps:
        for entry in dump.entries:
            users.setdefault(entry.group, set()).add(dump.rank)
            descs.setdefault(entry.group, entry.group_desc)
        for name in dump.status:
            users.setdefault(name, set()).add(dump.rank)
    unnamed = configs.pop("", None)
    merged = dict(configs)
    for name, ranks in users.items():
        if name in merged:
            continue
        if unnamed is not None and descs.get(name, "default_pg") == "default_pg":
            merged[name] = ProcessGroup(name, "default_pg", "", unnamed.ranks or tuple(sorted(ranks)))
        else:
            merged[name] = ProcessGroup(name, descs.get(name, ""), "", tuple(sorted(ranks)))
    return merged
