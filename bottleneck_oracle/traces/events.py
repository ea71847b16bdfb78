"""The normalized, columnar form of a trace: events, lanes, flows and per-rank facts.

Every rank's events live in one ``EventTable`` of numpy columns; strings (op
names, collective names, process groups) are interned in ``Trace.strings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

__all__ = ["EventTable", "LaneTable", "FlowTable", "ProcessGroup", "RankInfo", "Trace", "UNREAD_CATEGORY"]

UNREAD_CATEGORY = "category not read: "  # a skipped-events reason, followed by the category


def _concat(cls: type, parts: list[object]) -> object:
    return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})


@dataclass(frozen=True, slots=True)
class EventTable:
    """One row per trace event that has a duration (Kineto ``ph: X``).

    Shapes:
        every field is a 1-D array of length N. Times are int64 ns from
        ``Trace.origin_ns``; ids use -1 for "none"; ``comms_id`` uses 0.
    """

    rank: np.ndarray  # int32
    kind: np.ndarray  # int8, EventKind
    name: np.ndarray  # int32 -> Trace.strings
    lane: np.ndarray  # int32 -> LaneTable
    start_ns: np.ndarray  # int64
    dur_ns: np.ndarray  # int64
    correlation: np.ndarray  # int64, CUPTI correlation
    external_id: np.ndarray  # int64, profiler op id
    stream: np.ndarray  # int64, args.stream (GPU and sync events)
    nbytes: np.ndarray  # int64, bytes moved by a copy
    seq_number: np.ndarray  # int64, autograd sequence number
    sync_kind: np.ndarray  # int8, SyncKind
    wait_stream: np.ndarray  # int64, stream a sync waits on
    wait_record: np.ndarray  # int64, correlation of the awaited cudaEventRecord
    coll_name: np.ndarray  # int32 -> strings, "Collective name"
    pg_name: np.ndarray  # int32 -> strings, process group name
    coll_seq: np.ndarray  # int64, per-group collective sequence number
    comms_id: np.ndarray  # uint64, cross-rank collective id (0 = none)
    nelems: np.ndarray  # int64, elements of the first input tensor (comm ops)
    dtype: np.ndarray  # int32 -> strings
    group_size: np.ndarray  # int32
    peer: np.ndarray  # int32, the other rank of a point-to-point send/recv (-1)

    def __len__(self) -> int:
        return len(self.start_ns)

    @property
    def end_ns(self) -> np.ndarray:
        """int64[N]: start + duration."""
        return self.start_ns + self.dur_ns

    def take(self, index: np.ndarray) -> EventTable:
        """Returns the rows ``index`` (an integer or boolean array) as a new table."""
        return EventTable(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    @classmethod
    def concat(cls, parts: list[EventTable]) -> EventTable:
        """Stacks tables row-wise."""
        return _concat(cls, parts)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class LaneTable:
    """One row per timeline: a CPU thread (rank, pid, tid) or a GPU stream (rank, device, stream)."""

    rank: np.ndarray  # int32
    is_gpu: np.ndarray  # bool
    device: np.ndarray  # int32, -1 on CPU lanes
    stream: np.ndarray  # int64, -1 on CPU lanes
    pid: tuple[str, ...]
    tid: tuple[str, ...]
    label: tuple[str, ...]  # thread name or "stream N"

    def __len__(self) -> int:
        return len(self.rank)


@dataclass(frozen=True, slots=True)
class FlowTable:
    """Flow endpoints (``ph`` s/f) of the categories we use: ``fwdbwd`` and launch flows."""

    rank: np.ndarray  # int32
    is_fwdbwd: np.ndarray  # bool; False = ac2g / async_cpu_to_gpu
    flow_id: np.ndarray  # int64
    is_start: np.ndarray  # bool
    lane: np.ndarray  # int32
    ts_ns: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.ts_ns)

    @classmethod
    def concat(cls, parts: list[FlowTable]) -> FlowTable:
        """Stacks tables row-wise."""
        return _concat(cls, parts)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """A process group from ``distributedInfo.pg_config``."""

    name: str
    description: str
    backend: str
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RankInfo:
    """What one rank's file says about itself.

    Args:
        rank (int): global rank.
        path (Path): the file it was read from.
        rank_source (str): ``distributedInfo``, ``file name`` or ``single file``.
        world_size (int | None): from ``distributedInfo`` when present.
        backend (str | None): ``nccl``, ``gloo``...
        base_ns (int): ``baseTimeNanoseconds`` (0 when absent); a file ``ts`` in
            µs is ``(start_ns + Trace.origin_ns - base_ns) / 1000``.
        devices (tuple[str, ...]): GPU names from ``deviceProperties``.
        process_groups (tuple[ProcessGroup, ...]): from ``pg_config``.
        window_start_ns (int): start of the recording window.
        window_end_ns (int): end of the recording window.
        events (int): events read (all phases).
        zero_duration (int): complete events of zero duration.
        skipped_events (Mapping[str, int]): events of this file left out, by reason
            (``negative dur``, ``bad External id``...; see ``traces/_validate.py``).
        clock_offset_ns (int): how far its host's clock read ahead of the job's, taken off its times
            (``Trace.with_clocks_moved``); 0 as recorded.
    """

    rank: int
    path: Path
    rank_source: str
    world_size: int | None
    backend: str | None
    base_ns: int
    devices: tuple[str, ...]
    process_groups: tuple[ProcessGroup, ...]
    window_start_ns: int
    window_end_ns: int
    events: int
    zero_duration: int
    skipped_events: Mapping[str, int] = field(default_factory=dict)
    clock_offset_ns: int = 0


@dataclass(frozen=True, slots=True)
class Trace:
    """Every rank of one job, normalized.

    Args:
        events (EventTable): all complete events of all ranks.
        lanes (LaneTable): timelines that ``events.lane`` points into.
        flows (FlowTable): flow endpoints.
        strings (tuple[str, ...]): interned names.
        ranks (tuple[RankInfo, ...]): one entry per rank, sorted by rank.
        origin_ns (int): absolute epoch ns of time 0.
        data_deps (np.ndarray): int64[K, 2] event-row pairs (producer, consumer)
            from PyTorch execution traces; empty without them.
        skipped_events (Mapping[str, int]): events (and execution-trace nodes) of all
            files left out as malformed, or of a category not read (``UNREAD_CATEGORY``), by
            reason; empty when every event was usable.
    """

    events: EventTable
    lanes: LaneTable
    flows: FlowTable
    strings: tuple[str, ...]
    ranks: tuple[RankInfo, ...]
    origin_ns: int
    data_deps: np.ndarray
    skipped_events: Mapping[str, int] = field(default_factory=dict)

    def rank_info(self, rank: int) -> RankInfo:
        """The ``RankInfo`` of ``rank``."""
        for info in self.ranks:
            if info.rank == rank:
                return info
        raise KeyError(f"no rank {rank} in this trace")

    def with_clocks_moved(self, offset_ns: np.ndarray) -> Trace:
        """This trace with each rank's times taken back by what its clock read ahead (``offset_ns``, int64
        by rank; ``analysis/clocks.py``), time 0 still at the earliest event. A file's own times stay
        reachable: ``base_ns`` moves with the rank's times."""
        ev, fl = self.events, self.flows
        start = ev.start_ns - offset_ns[ev.rank]
        moved = {i.rank: int(offset_ns[i.rank]) for i in self.ranks}
        lead = -min(0, int(start.min(initial=0)), *(i.window_start_ns - moved[i.rank] for i in self.ranks))  # none < 0
        ranks = tuple(replace(
            i, base_ns=i.base_ns - moved[i.rank], clock_offset_ns=i.clock_offset_ns + moved[i.rank],
            window_start_ns=i.window_start_ns - moved[i.rank] + lead,
            window_end_ns=i.window_end_ns - moved[i.rank] + lead) for i in self.ranks)
        return replace(self, events=replace(ev, start_ns=start + lead),
                       flows=replace(fl, ts_ns=fl.ts_ns - offset_ns[fl.rank] + lead),
                       ranks=ranks, origin_ns=self.origin_ns - lead)
