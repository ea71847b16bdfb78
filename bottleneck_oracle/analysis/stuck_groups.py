"""The process groups a hung job is stuck in, read from its Flight Recorder dumps: in each group, the first
collective some member has not completed, who entered it, who did not, and the first call at which the
members differ. ``analysis/hang.py`` turns these into the job's verdict."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from bottleneck_oracle.traces.flight_recorder import DumpEntry, FlightRecord

__all__ = ["Divergence", "GroupHang", "collectives", "counters", "is_done", "stuck_groups", "unrecorded_calls"]

_PEER = re.compile(r"(\d+)\s*(->|<-)\s*(\d+)")  # "send 0->1", "recv 1<-0"


@dataclass(frozen=True)
class Divergence:
    """The first collective at which a group's ranks called different things."""

    group: str
    seq: int
    kind: str  # "op", "sizes", "dtypes" or "call site"
    expected: str  # what most ranks called
    found: dict[int, str]  # what each other rank called instead
    culprits: tuple[int, ...]  # the ranks outside the majority (empty when the ranks split evenly)
    by_siblings: bool = False  # the group's own ranks split evenly; its sibling groups' calls broke the tie

    def to_json(self) -> dict:
        return {"group": self.group, "seq": self.seq, "kind": self.kind, "expected": self.expected,
                "found": {str(r): v for r, v in self.found.items()}, "ranks": list(self.culprits),
                "by_sibling_groups": self.by_siblings}


@dataclass(frozen=True)
class GroupHang:
    """One process group's stuck collective and who holds it up."""

    group: str
    desc: str
    members: tuple[int, ...]
    seq: int
    entry: DumpEntry  # the stuck collective, as a waiting rank recorded it
    waiting: tuple[int, ...]
    behind: dict[int, int]  # rank → the last collective it entered in this group
    missing: tuple[int, ...]  # members with no dump
    divergence: Divergence | None
    cause: str  # "mismatch", "behind", "missing_dump", "stalled" or "p2p"
    culprits: tuple[int, ...]


def stuck_groups(record: FlightRecord) -> list[GroupHang]:
    """Every process group with a collective (or a point-to-point call) some member waits in."""
    stuck = [h for name, config in record.groups.items()
             if (h := _group_hang(record, name, config.description, config.ranks)) is not None]
    return stuck + _p2p_hangs(record, {h.group for h in stuck})


def collectives(record: FlightRecord, rank: int, group: str) -> list[DumpEntry]:
    return sorted((e for e in record.calls(rank, group) if not e.is_p2p), key=lambda e: e.seq)


def is_done(entry: DumpEntry) -> bool:
    return entry.state == "completed" or entry.retired


def counters(record: FlightRecord, rank: int, group: str) -> tuple[int, int]:
    """The last collective the rank entered and the last it completed in the group."""
    entries = collectives(record, rank, group)
    status = record.dumps[rank].status.get(group)
    # the status counters count collectives on NCCL but every call on gloo (point-to-point too): they are read as
    # collective numbers only where the two agree on every recorded entry
    if status is not None and not all(e.op_id in (-1, e.seq) for e in entries):
        status = None
    enqueued = max([e.seq for e in entries] + [status.enqueued if status else -1])
    done = max([e.seq for e in entries if is_done(e)] + [status.completed if status else -1])
    return enqueued, done


def _group_hang(record: FlightRecord, group: str, desc: str, members: tuple[int, ...]) -> GroupHang | None:
    dumped = [r for r in members if r in record.dumps]
    if not dumped:
        return None
    progress = {r: counters(record, r, group) for r in dumped}
    seq = min(done for _, done in progress.values()) + 1
    waiting = tuple(r for r, (enq, done) in progress.items() if enq >= seq > done)
    if not waiting:
        return None
    behind = {r: enq for r, (enq, _) in progress.items() if enq < seq}
    missing = tuple(r for r in members if r not in record.dumps)
    divergence = _first_divergence(record, group, dumped, seq)
    if divergence is not None and divergence.seq <= seq and divergence.culprits:
        cause, culprits = "mismatch", divergence.culprits
    elif behind:
        cause, culprits = "behind", tuple(sorted(behind))
    elif missing:
        cause, culprits = "missing_dump", missing
    elif divergence is not None and divergence.seq <= seq:
        cause, culprits = "mismatch", ()
    else:
        cause, culprits = "stalled", ()
    waiting = tuple(r for r in waiting if r not in culprits) or waiting  # a rank that called something else is
    # not waiting in this collective; it is the one the others wait for
    entry = next((e for r in (*waiting, *dumped) for e in collectives(record, r, group) if e.seq == seq), None)
    if entry is None:  # the ring buffer lost the entry; the counters still say the rank entered it
        return None
    return GroupHang(group, desc, members, seq, entry, waiting, behind, missing, divergence, cause, culprits)


def _signature(entry: DumpEntry, kind: str) -> str:
    if kind == "op":
        return entry.op
    if kind == "sizes":
        return " ".join(str(list(s)) for s in entry.input_sizes) or "-"
    if kind == "dtypes":
        return ",".join(entry.dtypes) or "-"
    return entry.where


def _first_divergence(record: FlightRecord, group: str, ranks: list[int], up_to: int) -> Divergence | None:
    """The first sequence number, up to the stuck one, at which the ranks' calls differ."""
    by_rank = {r: {e.seq: e for e in collectives(record, r, group)} for r in ranks}
    seqs = sorted({s for calls in by_rank.values() for s in calls if s <= up_to})
    with_frames = all(e.where for calls in by_rank.values() for e in calls.values())
    kinds = ("op", "sizes", "dtypes", "call site") if with_frames else ("op", "sizes", "dtypes")
    for seq in seqs:
        calls = {r: calls[seq] for r, calls in by_rank.items() if seq in calls}
        if len(calls) < 2:
            continue
        for kind in kinds:
            seen = {r: _signature(e, kind) for r, e in calls.items()}
            if len(set(seen.values())) == 1:
                continue
            counts = Counter(seen.values()).most_common()
            siblings = Counter()
            if len(counts) > 1 and counts[1][1] == counts[0][1]:  # a tie: the sibling groups vote too
                siblings = _sibling_votes(record, group, seq, kind)
            votes = (Counter(seen.values()) + Counter({k: v for k, v in siblings.items() if k in seen.values()}))
            ranked = votes.most_common()
            even = len(ranked) > 1 and ranked[1][1] == ranked[0][1]
            expected = ranked[0][0]
            others = {r: v for r, v in seen.items() if v != expected}
            return Divergence(group, seq, kind, "" if even else expected, others,
                              () if even else tuple(sorted(others)), by_siblings=bool(siblings) and not even)
    return None


def _sibling_votes(record: FlightRecord, group: str, seq: int, kind: str) -> Counter[str]:
    """What the ranks of the group's siblings (groups of the same description and size: the other data-parallel
    replicas, the other tensor-parallel groups) called at the same sequence number: they run the same program."""
    me = record.groups[group]
    votes: Counter[str] = Counter()
    for name, other in record.groups.items():
        if name == group or other.description != me.description or len(other.ranks) != len(me.ranks):
            continue
        for rank in other.ranks:
            if rank in record.dumps:
                entry = next((e for e in collectives(record, rank, name) if e.seq == seq), None)
                if entry is not None:
                    votes[_signature(entry, kind)] += 1
    return votes


def _p2p_hangs(record: FlightRecord, groups_stuck: set[str]) -> list[GroupHang]:
    """Point-to-point calls left waiting: a receive whose sender never sent (or the other way round)."""
    hangs = []
    for name, config in record.groups.items():
        if name in groups_stuck:
            continue
        open_calls = {r: e for r in config.ranks for e in record.calls(r, name) if e.is_p2p and not is_done(e)}
        if not open_calls:
            continue
        waiting = tuple(sorted(open_calls))
        peers = {_peer(e, r, config.ranks) for r, e in open_calls.items()} - {None}
        culprits = tuple(sorted(p for p in peers if p not in open_calls or p not in record.dumps))
        first = min(open_calls.values(), key=lambda e: e.created_ns)
        missing = tuple(r for r in config.ranks if r not in record.dumps)
        hangs.append(GroupHang(name, config.description, config.ranks, first.seq, first, waiting, {}, missing, None,
                               "p2p", culprits))
    return hangs


def _peer(entry: DumpEntry, rank: int, members: tuple[int, ...]) -> int | None:
    match = _PEER.search(entry.label)
    if match:
        a, b = int(match[1]), int(match[3])
        return b if a == rank else a
    others = [m for m in members if m != rank]
    return others[0] if len(others) == 1 else None


def unrecorded_calls(record: FlightRecord) -> dict[int, int]:
    """Rank → how many of its calls its dump does not hold, counted by the groups' call numbers (op ids): gloo
    counts its sends and receives but records none. Calls the ring buffer dropped are not counted."""
    out: dict[int, int] = {}
    for rank, dump in record.dumps.items():
        unwrapped = any(e.record == 0 for e in dump.entries)  # the rank's first call is still in its buffer
        for group in {e.group for e in dump.entries} | set(dump.status):
            ops = {e.op_id for e in dump.entries if e.group == group and e.op_id >= 0}
            status = dump.status.get(group)
            made = max([*ops, status.enqueued if status else 0])
            first = 1 if unwrapped else min(ops, default=made)
            missing = max(0, made - first + 1 - len(ops)) if ops else 0
            if missing:
                out[rank] = out.get(rank, 0) + missing
    return out
