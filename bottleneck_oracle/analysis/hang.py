"""Why a distributed job hangs, from its Flight Recorder dumps: the collective it is stuck in, the ranks
waiting in it, the rank(s) everyone waits for, and where the ranks first went different ways.

Each process group numbers its collectives on every member rank alike, so the ranks' entries are matched
by that number. In a group the first collective some member has not completed is the stuck one; the
members that entered it wait; the culprit is, in this order, a rank that called something else at or
before that number (the first divergence: op, sizes, dtypes or call site), a rank that never entered it,
or a member that left no dump. A group whose culprits are themselves waiting in another group's stuck
collective only passes the hang on; the verdict follows the chain to the group where it began.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bottleneck_oracle.analysis.stuck_groups import (
    Divergence,
    GroupHang,
    collectives,
    counters,
    is_done,
    stuck_groups,
    unrecorded_calls,
)
from bottleneck_oracle.traces.flight_recorder import DumpEntry, FlightRecord

__all__ = ["Divergence", "GroupHang", "HangVerdict", "hang_verdict"]


@dataclass(frozen=True)
class HangVerdict:
    """What the dumps say about the job: ``hang``, ``none`` or ``unknown``, and why."""

    verdict: str
    cause: str
    culprit_ranks: tuple[int, ...]
    waiting_ranks: tuple[int, ...]
    collective: dict | None  # {seq, op, group, sizes}
    first_divergence: Divergence | None
    where: dict[int, str]  # rank → the line of the job (first frame outside torch) of its relevant call
    missing_dumps: tuple[int, ...]
    skipped_files: tuple[tuple[str, str], ...]
    explanation: tuple[str, ...]  # sentences, most important first
    next_steps: tuple[str, ...]
    groups: tuple[GroupHang, ...] = ()  # every group found stuck, the root first
    ranks: dict[int, dict[str, dict]] = field(default_factory=dict)  # rank → group → its counters and last op

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict, "cause": self.cause,
            "culprit_ranks": list(self.culprit_ranks), "waiting_ranks": list(self.waiting_ranks),
            "collective": self.collective,
            "first_divergence": self.first_divergence.to_json() if self.first_divergence else None,
            "where": {str(r): w for r, w in self.where.items()},
            "missing_dumps": list(self.missing_dumps),
            "skipped_files": [{"file": f, "reason": why} for f, why in self.skipped_files],
            "explanation": list(self.explanation), "next_steps": list(self.next_steps),
            "stuck_groups": [{"group": g.group, "desc": g.desc, "seq": g.seq, "op": g.entry.op,
                              "waiting_ranks": list(g.waiting), "culprit_ranks": list(g.culprits), "cause": g.cause}
                             for g in self.groups],
            "ranks": {str(r): groups for r, groups in self.ranks.items()},
        }


def hang_verdict(record: FlightRecord) -> HangVerdict:
    """Reads the job's hang, if any, from its dumps (see the module's docstring for the rules)."""
    stuck = stuck_groups(record)
    ranks = _rank_rows(record)
    skipped = tuple((str(f), why) for f, why in record.skipped)
    if not stuck:
        return _no_hang(record, ranks, skipped)
    root = _root(stuck)
    ordered = (root, *[h for h in stuck if h is not root])
    waiting = tuple(sorted(root.waiting))  # in the stuck collective; the hang it passed on is in stuck_groups
    where = {r: e.where for r in root.waiting if (e := _entry_at(record, r, root)) is not None and e.where}
    for r in root.culprits:
        last = _culprit_entry(record, r, root)
        if last is not None and last.where:
            where[r] = last.where
    explanation, steps = _explain(record, root, ordered)
    collective = {"seq": root.seq, "op": root.entry.op, "group": root.group, "group_desc": root.desc,
                  "sizes": [list(s) for s in root.entry.input_sizes], "dtypes": list(root.entry.dtypes),
                  "p2p": root.entry.is_p2p}
    return HangVerdict("hang", root.cause, root.culprits, waiting, collective, root.divergence,
                       dict(sorted(where.items())), record.missing_ranks, skipped, explanation, steps, ordered, ranks)


def _root(stuck: list[GroupHang]) -> GroupHang:
    """The group where the hang began: its culprits are not themselves waiting in another group's hang."""
    waiting_in = {r: h for h in stuck for r in h.waiting}

    def passes_on(h: GroupHang) -> bool:
        return h.cause in ("behind", "p2p") and bool(h.culprits) and all(
            waiting_in.get(r) not in (None, h) for r in h.culprits)

    roots = [h for h in stuck if not passes_on(h)] or stuck
    return min(roots, key=lambda h: (h.cause == "stalled", h.entry.created_ns))


def _entry_at(record: FlightRecord, rank: int, hang: GroupHang) -> DumpEntry | None:
    entries = record.dumps[rank].entries
    match = [e for e in entries if e.group == hang.group and e.seq == hang.seq and e.is_p2p == hang.entry.is_p2p]
    return match[0] if match else None


def _culprit_entry(record: FlightRecord, rank: int, hang: GroupHang) -> DumpEntry | None:
    """The culprit's call that matters: the one that diverged, else the last it made anywhere."""
    if rank not in record.dumps:
        return None
    if hang.divergence is not None and rank in hang.divergence.culprits:
        return next(e for e in collectives(record, rank, hang.group) if e.seq == hang.divergence.seq)
    entries = record.dumps[rank].entries
    return max(entries, key=lambda e: (e.record, e.created_ns)) if entries else None


def _ranks(ranks: tuple[int, ...]) -> str:
    if not ranks:
        return "no rank"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _at(where: str) -> str:
    return f" at {where}" if where else ""


def _headline(root: GroupHang, what: str) -> str:
    """The verdict in one sentence: who holds the job, and in which call."""
    who = _ranks(root.culprits).capitalize()
    group = f"group {root.group}" + (f" ({root.desc})" if root.desc else "")
    if root.cause == "behind":
        return f"{who} holds up the job: it never entered {what}, where the others wait."
    if root.cause == "mismatch" and root.culprits:
        d = root.divergence
        theirs = " / ".join(sorted(set(d.found.values())))
        verb = {"op": "called", "call site": "called from"}.get(d.kind, f"passed {d.kind}")
        if d.seq == root.seq:
            return (f"{who} went astray: it {verb} {theirs} as #{d.seq} of {group}, where the others {verb} "
                    f"{d.expected} and wait.")
        return (f"{who} went astray at #{d.seq} of {group}: it {verb} {theirs} where the others {verb} "
                f"{d.expected}, and the job hangs in {what}.")
    if root.cause == "mismatch":
        return f"The ranks disagree at #{root.divergence.seq} of group {root.group}, and the job hangs in {what}."
    if root.cause == "missing_dump":
        return f"{who} left no dump and never entered {what}, where the others wait: it probably died."
    if root.cause == "p2p":
        return (f"{who} never made the transfer that {what} waits for." if root.culprits
                else f"The job hangs in {what}, a transfer whose partner the dumps do not name.")
    return f"Every rank waits in {what} and none finished it: the collective itself stalls."


def _explain(record: FlightRecord, root: GroupHang,
             stuck: tuple[GroupHang, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The verdict's sentences (the headline first) and what to look at next."""
    e = root.entry
    group = f"group {root.group}" + (f" ({root.desc})" if root.desc else "")
    what = f"{e.op} #{root.seq} of {group}" if not e.is_p2p else f"{e.op} (p2p #{root.seq}) in {group}"
    lines = [_headline(root, what), f"{_ranks(root.waiting).capitalize()} wait{'s' if len(root.waiting) == 1 else ''} "
             f"in {what}{_at(e.where)}."]
    steps = []
    if root.cause == "mismatch" and root.divergence is not None:
        d = root.divergence
        found = "; ".join(f"rank {r}: {v}" for r, v in d.found.items())
        if d.culprits and d.seq != root.seq:
            lines.append(f"{_ranks(d.culprits).capitalize()} went astray at #{d.seq} of group {d.group}: "
                         f"the {d.kind} differs ({found}) where the others have {d.expected}.")
        if d.by_siblings:
            lines.append(f"The group's own ranks split evenly at #{d.seq}; its sibling groups (of the same "
                         f"description and size) called {d.expected} there, so {_ranks(d.culprits)} is the odd one.")
        elif not d.culprits:
            lines.append(f"The ranks split evenly at #{d.seq} of group {d.group}: the {d.kind} differs ({found}).")
        steps.append("The ranks took different code paths: look for a branch on the rank or on the data before "
                     "that call, or a collective called on some ranks only." if d.kind in ("op", "call site") else
                     "The ranks passed tensors of different shapes or types: check what each rank sends into that "
                     "call (a ragged last batch, a rank-dependent shape).")
    elif root.cause == "behind":
        for r, last in sorted(root.behind.items()):
            entry = _culprit_entry(record, r, root)
            seen = f"its last call was {entry.op}{_at(entry.where)}" if entry else "it recorded no call"
            gap = root.seq - last
            lines.append(f"Rank {r} never entered it: it is {gap} collective{'s' if gap > 1 else ''} behind in "
                         f"{group} ({seen}).")
        elsewhere = [(r, h) for h in stuck if h is not root for r in root.culprits if r in h.waiting]
        for r, h in elsewhere:
            lines.append(f"Rank {r} is itself waiting in {h.entry.op} #{h.seq} of group {h.group}: the ranks "
                         "wait on each other (a deadlock), so it called that one where the others first called "
                         f"{e.op} #{root.seq}.")
        steps.append(f"See where {_ranks(root.culprits)} {'is' if len(root.culprits) == 1 else 'are'} now "
                     "(py-spy dump --pid on its process): the code between its last call and this one is slow or "
                     "stuck (data loading, I/O, a lock, a Python loop), or it skipped this call.")
    elif root.cause == "missing_dump":
        lines.append("A rank that dies (a crash, out of memory, killed) leaves the others waiting in its next "
                     "collective; the dumps cannot say why it stopped.")
        steps.append(f"Read the log of {_ranks(root.missing)} for the error that ended it; the others only wait.")
    elif root.cause == "p2p":
        peer = _ranks(root.culprits)
        lines.append(f"Its partner ({peer}) has no matching call outstanding: it never made the send or receive "
                     "this one waits for." if root.culprits else "Its partner could not be told from the dump.")
        steps.append("Check the pipeline schedule: a stage that skips a microbatch or runs a different number of "
                     "them leaves its neighbour waiting.")
    else:
        lines.append("Every member entered it and none finished: the collective itself stalls.")
        steps.append("Suspect the network or the backend (NCCL_DEBUG=INFO, the links between the hosts), or a "
                     "rank whose GPU is stuck in work queued before this call.")
    if root.missing and root.cause != "missing_dump":
        lines.append(f"{_ranks(root.missing).capitalize()} left no dump.")
    if record.skipped:
        lines.append(f"{len(record.skipped)} file(s) could not be read and were skipped.")
    return tuple(lines), tuple(steps)


def _no_hang(record: FlightRecord, ranks: dict, skipped: tuple) -> HangVerdict:
    unrecorded = unrecorded_calls(record)
    if record.missing_ranks or unrecorded:
        why, look = [], []
        if record.missing_ranks:
            why.append(f"{_ranks(record.missing_ranks)} left no dump")
            look.append(f"Read the log of {_ranks(record.missing_ranks)}: a rank that died before its next collective "
                        "leaves the others waiting without a stuck entry in theirs.")
        if unrecorded:
            counts = ", ".join(f"rank {r}: {n}" for r, n in sorted(unrecorded.items()))
            why.append(f"the ranks made calls their dumps do not record ({counts}), such as the point-to-point "
                       "sends and receives gloo leaves out")
            look.append("Look at the point-to-point schedule (pipeline sends and receives): py-spy dump on each "
                        "rank shows which one waits in a receive.")
        return HangVerdict("unknown", "unrecorded" if unrecorded else "missing_dump", (), (), None, None, {},
                           record.missing_ranks, skipped,
                           (f"Every collective the dumps record completed, but {' and '.join(why)}.",),
                           tuple(look), (), ranks)
    return HangVerdict("none", "none", (), (), None, None, {}, (), skipped,
                       ("Every rank completed every collective it entered: the dumps show no hang.",),
                       ("If the job still stops, look outside collectives: the data loader, I/O or a checkpoint.",),
                       (), ranks)


def _rank_rows(record: FlightRecord) -> dict[int, dict[str, dict]]:
    rows: dict[int, dict[str, dict]] = {}
    for r, dump in record.dumps.items():
        for name in record.groups:
            entries = record.calls(r, name)
            if not entries and name not in dump.status:
                continue
            enqueued, done = counters(record, r, name)
            last = max(entries, key=lambda e: (e.record, e.seq)) if entries else None
            rows.setdefault(r, {})[name] = {
                "last_enqueued": enqueued, "last_completed": done,
                "last_op": last.op if last else None, "calls": [[e.seq, e.op, is_done(e), e.is_p2p] for e in
                                                                sorted(entries, key=lambda e: (e.is_p2p, e.seq))]}
    return rows
