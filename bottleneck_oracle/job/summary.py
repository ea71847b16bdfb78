"""A job read one rank at a time: what each rank says alone, and what the ranks say together.

The graph's build reads every rank at once in two places only: the matching of collectives (keys seen on
several ranks) and the times of each instance (its first member done, its last arrived), which end a gloo op
where its waiting thread went on. So a rank is summarised in two rounds, with a reduce over the job's
members between them (``job/scan.py`` runs them):

1. ``rank_keys``: the rank's comm nodes, with every key each could be matched by, and their times.
2. ``match_job``: the instances over every rank's keys, in the job's graph's order, and per rank what its
   members need from the others (``build.JobCollectives``).
3. ``rank_summary``: the rank's graph built alone with that, reduced to its steps, the GPU timeline of each,
   its members' final times (what the slow steps, the clocks and the stragglers are read from) and the chains
   its steps' critical paths can take (``job/job_paths.py``).

Times in a summary are on the rank's own clock, from its own first event; ``JobFrame`` puts them on the job's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.build import build_graph, comm_keys
from bottleneck_oracle.graph.collectives import CommNodes, group_instances
from bottleneck_oracle.graph.path_nodes import ForeignNodes, checkpoint_ranges, p2p_instances, p2p_nodes
from bottleneck_oracle.graph.gpu_timeline import GpuTimeline, step_gpu_timeline, trace_gpu_timeline
from bottleneck_oracle.graph.graph import CollectiveTable
from bottleneck_oracle.graph.job_collectives import JobCollectives, RemoteSends
from bottleneck_oracle.job.job_paths import RankPaths, rank_paths
from bottleneck_oracle.traces import Trace

__all__ = ["JobFrame", "NodeNames", "RankKeys", "RankSummary", "match_job", "rank_keys", "rank_summary"]

_NO = np.zeros(0, dtype=np.int64)
_HOW = ("comms_id", "seq", "order")  # the keys a class of comm nodes is matched by, best first


@dataclass(frozen=True, slots=True)
class RankKeys:
    """Round 1 of one rank: its comm nodes and where its times sit.

    Args:
        rank (int): the rank.
        origin_ns (int): the epoch ns of its time 0 (its first event).
        first_ns (int): its earliest event's start, on its time.
        window_start_ns (int): where its recording window opens, on its time.
        comm (list[CommNodes]): its comm nodes by class, with every key each could be matched by.
        start (list[np.ndarray]): int64, per class, each comm node's start.
        end (list[np.ndarray]): int64, per class, each comm node's end, before any collective moves it.
    """

    rank: int
    origin_ns: int
    first_ns: int
    window_start_ns: int
    comm: list[CommNodes]
    start: list[np.ndarray]
    end: list[np.ndarray]


def rank_keys(trace: Trace) -> RankKeys:
    """Round 1 of the trace of one rank."""
    (info,) = trace.ranks
    comm, start, end = comm_keys(trace)
    return RankKeys(rank=info.rank, origin_ns=trace.origin_ns, first_ns=int(trace.events.start_ns.min()),
                    window_start_ns=info.window_start_ns, comm=comm, start=[start[c.nodes] for c in comm],
                    end=[end[c.nodes] for c in comm])


@dataclass(frozen=True, slots=True)
class JobFrame:
    """Where each rank's times sit on the job's clock: ``job time = own time + shift_ns[rank]``.

    As ``read_trace`` and ``Trace.with_clocks_moved`` put them: from the earliest first event of all ranks,
    each rank's clock taken back by its offset, and time 0 kept at the earliest event.
    """

    shift_ns: dict[int, int]

    @classmethod
    def of(cls, keys: list[RankKeys], offset_ns: np.ndarray | None = None) -> JobFrame:
        origin = min(k.origin_ns for k in keys)
        moved = {k.rank: int(offset_ns[k.rank]) if offset_ns is not None else 0 for k in keys}
        shift = {k.rank: k.origin_ns - origin - moved[k.rank] for k in keys}
        if offset_ns is None:
            return cls(shift)
        lead = -min(0, *(k.first_ns + shift[k.rank] for k in keys), *(k.window_start_ns + shift[k.rank] for k in keys))
        return cls({r: s + lead for r, s in shift.items()})


def match_job(keys: list[RankKeys], frame: JobFrame) -> tuple[list[JobCollectives], CollectiveTable]:
    """The job's collective instances over every rank's keys (``keys`` in rank order), numbered as the job's
    graph numbers them: what each rank's members need from the others, and the job's table."""
    per_rank: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {k.rank: [] for k in keys}
    sends: dict[int, list[tuple[int, int, int, int, int]]] = {k.rank: [] for k in keys}  # receiver → pairs
    sent: dict[int, list[int]] = {k.rank: [] for k in keys}  # sender → its sends to other ranks
    times: list[tuple[int, int, int, int]] = []  # per instance: first end, last start, its rank and node
    kind: list[str] = []
    key: list[str] = []
    members: list[int] = []
    reliable: list[bool] = []
    for on_gpu in (True, False):
        parts = [(k, i) for k in keys for i, c in enumerate(k.comm) if c.on_gpu == on_gpu]
        if not parts:
            continue
        how = next(h for h in _HOW if all(h in k.comm[i].keys for k, i in parts))
        flat = [key for k, i in parts for key in k.comm[i].key_list(how)]
        rank = np.concatenate([np.full(len(k.comm[i].nodes), k.rank, dtype=np.int64) for k, i in parts])
        node = np.concatenate([k.comm[i].nodes for k, i in parts])
        start = np.concatenate([k.start[i] + frame.shift_ns[k.rank] for k, i in parts])
        end = np.concatenate([k.end[i] + frame.shift_ns[k.rank] for k, i in parts])
        ctype = [t for k, i in parts for t in k.comm[i].kinds]
        for pos, ok in group_instances(flat, rank, start, end):
            iid = len(kind)
            kind.append(ctype[int(pos[0])])
            key.append(how)
            members.append(len(pos))
            reliable.append(ok)
            last = pos[start[pos] == start[pos].max()]
            last = last[np.lexsort((node[last], rank[last]))[0]]  # the lowest of the job's graph's nodes
            times.append((int(end[pos].min()), int(start[last]), int(rank[last]), int(node[last])))
            for r in np.unique(rank[pos]).tolist():
                mine = pos[rank[pos] == r]
                per_rank[r].append((node[mine], np.full(len(mine), iid, dtype=np.int64)))
            if not on_gpu and flat[int(pos[0])][0] == "p2p":
                _remote_pair(sends, sent, iid, flat[int(pos[0])], rank[pos], node[pos], end[pos])
    table = CollectiveTable(kind=tuple(kind), key=tuple(key), members=np.array(members, dtype=np.int32),
                            reliable=np.array(reliable, dtype=bool))
    per_instance = np.array(times, dtype=np.int64).reshape(-1, 4).T
    return [_job_of(per_rank[k.rank], sends[k.rank], sent[k.rank], table, per_instance, frame.shift_ns[k.rank])
            for k in keys], table


def _remote_pair(sends: dict[int, list[tuple[int, int, int, int, int]]], sent: dict[int, list[int]], iid: int,
                 key: tuple[object, ...], rank: np.ndarray, node: np.ndarray, end: np.ndarray) -> None:
    """A gloo transfer from rank a to rank b (its key ``("p2p", a, b, k)``) on two ranks: the receive's rank
    is told when each send ended (the job's graph pairs each send with the instance's last receive)."""
    a, b = int(key[1]), int(key[2])  # type: ignore[call-overload]
    receives = np.flatnonzero(rank == b)
    if a == b or not len(receives) or b not in sends:
        return
    for i in np.flatnonzero(rank == a).tolist():
        sends[b].append((int(node[receives[-1]]), iid, a, int(node[i]), int(end[i])))
        sent[a].append(int(node[i]))


def _job_of(parts: list[tuple[np.ndarray, np.ndarray]], sends: list[tuple[int, int, int, int, int]], sent: list[int],
            table: CollectiveTable, per_instance: np.ndarray, shift: int) -> JobCollectives:
    first_end, last_start, last_rank, last_node = per_instance
    nodes = np.concatenate([p[0] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
    inst = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    rows = np.unique(inst)
    mine = CollectiveTable(kind=tuple(table.kind[i] for i in rows.tolist()), key=tuple(table.key[i] for i in rows.tolist()),
                           members=table.members[rows], reliable=table.reliable[rows])
    pairs = np.array(sends, dtype=np.int64).reshape(-1, 5).T
    return JobCollectives(
        nodes=nodes, instance=inst, table=mine, first_end=first_end[inst] - shift, last_start=last_start[inst] - shift,
        last_rank=last_rank[inst], last_node=last_node[inst],
        sends=RemoteSends(receive=pairs[0], instance=pairs[1], rank=pairs[2], node=pairs[3], end_ns=pairs[4] - shift),
        sent=np.array(sorted(set(sent)), dtype=np.int64),
    )


@dataclass(frozen=True, slots=True)
class RankSummary:
    """Round 2 of one rank: its steps, what its GPU did in each, and its collective members, on its own time.

    Args:
        rank (int): the rank.
        nodes (int): the nodes of its graph (the job's graph numbers its nodes after the lower ranks').
        events (int): its events.
        step, start_ns, end_ns, last_node: one row per step: its number, where its window opens, where its last
            work ends, and that work's node (-1: none, ``end_ns`` then meaningless).
        gpu (GpuTimeline): one row per step; ``gpu_trace``: one row over the trace, none without GPU work.
        member (np.ndarray): int64 its members of the job's instances, as nodes of its graph, in node order;
            ``instance``, ``member_start``, ``member_end``, ``member_step`` and ``transfer`` (one end of a GPU
            point-to-point transfer) per member.
        named (np.ndarray): int32 the nodes whose names the scan says (its members, the owners of its chains'
            edges, its sends to other ranks), in order; ``named_name`` indexes ``names`` for each; ``named_kind``,
            ``named_role`` and ``named_checkpoint`` are what ``path_nodes.PathNodes`` says of each.
        paths (RankPaths | None): the chains of its critical paths, and of those that reach it from other
            ranks (None: not asked for).
    """

    rank: int
    nodes: int
    events: int
    step: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    last_node: np.ndarray
    gpu: GpuTimeline
    gpu_trace: GpuTimeline
    member: np.ndarray
    instance: np.ndarray
    member_start: np.ndarray
    member_end: np.ndarray
    member_step: np.ndarray
    transfer: np.ndarray
    named: np.ndarray
    named_name: np.ndarray
    named_kind: np.ndarray
    named_role: np.ndarray
    named_checkpoint: np.ndarray
    names: tuple[str, ...]
    paths: RankPaths | None


def rank_summary(trace: Trace, job: JobCollectives, steps_from: str | None = None, paths: bool = True) -> RankSummary:
    """Round 2 of the trace of one rank, with what the others said of its collectives (``paths``: and the
    chains of its critical paths)."""
    g = build_graph(trace, steps_from=steps_from, job=job)
    steps = g.steps
    last = steps.last_node
    job_instance = np.full(len(g), -1, dtype=np.int64)
    job_instance[job.nodes] = job.instance
    m = np.flatnonzero(job_instance >= 0)
    chains = rank_paths(g, job) if paths else None
    owners = chains.owner[chains.owner >= 0] if chains else _NO
    named = np.unique(np.concatenate([m, owners, job.sent])).astype(np.int32)
    names, named_name = np.unique(g.name[named], return_inverse=True)
    return RankSummary(
        rank=trace.ranks[0].rank, nodes=len(g), events=len(trace.events), step=steps.step.astype(np.int64),
        start_ns=steps.start_ns.astype(np.int64), end_ns=np.where(last >= 0, g.end_ns[np.maximum(last, 0)], 0),
        last_node=last.astype(np.int64), gpu=step_gpu_timeline(g), gpu_trace=trace_gpu_timeline(trace),
        member=m, instance=job_instance[m], member_start=g.start_ns[m], member_end=g.end_ns[m],
        member_step=g.step[m].astype(np.int64), transfer=(p2p_nodes(g) & trace.lanes.is_gpu[g.lane])[m],
        named=named, named_name=named_name.ravel().astype(np.int32), named_kind=g.kind[named],
        named_role=g.role[named], named_checkpoint=checkpoint_ranges(g)[named],
        names=tuple(trace.strings[i] for i in names.tolist()), paths=chains,
    )


class NodeNames:
    """The nodes the summaries name, by the job graph's node id (``base``: each summary's first): their names and
    kinds, and which are pipeline transfers (``table``: the job's instances); a ``PathNodes`` of every path."""

    def __init__(self, summaries: list[RankSummary], base: list[int], table: CollectiveTable) -> None:
        self._base = np.array(base, dtype=np.int64)
        self._summaries = summaries
        self._p2p = np.append(p2p_instances(table), False)  # [-1]: no instance

    def _located(self, nodes: np.ndarray, column: str) -> list[tuple[RankSummary, np.ndarray, np.ndarray, np.ndarray]]:
        """Per summary holding some of ``nodes``: the summary, their places in ``nodes``, their places in its
        sorted ``column`` of nodes, and whether they are there."""
        which = np.searchsorted(self._base, nodes, side="right") - 1
        out = []
        for i in np.unique(which).tolist():
            sel = np.flatnonzero(which == i)
            s = self._summaries[i]
            local, ordered = nodes[sel] - self._base[i], getattr(s, column)
            at = np.minimum(np.searchsorted(ordered, local), max(len(ordered) - 1, 0))
            out.append((s, sel, at, ordered[at] == local if len(ordered) else np.zeros(len(sel), bool)))
        return out

    def _named_at(self, nodes: np.ndarray) -> list[tuple[RankSummary, np.ndarray, np.ndarray]]:
        """``_located`` in the summaries' named nodes, every one of ``nodes`` found.

        Raises:
            KeyError: a node no summary names."""
        out = []
        for s, sel, at, there in self._located(nodes, "named"):
            if not there.all():
                raise KeyError(int(nodes[sel[~there][0]]))
            out.append((s, sel, at))
        return out

    def _named(self, field: str, nodes: np.ndarray) -> np.ndarray:
        """``RankSummary.named_<field>`` of each of ``nodes``."""
        out = np.zeros(len(nodes), dtype=getattr(self._summaries[0], f"named_{field}").dtype)
        for s, sel, at in self._named_at(nodes):
            out[sel] = getattr(s, f"named_{field}")[at]
        return out

    def names_of(self, nodes: np.ndarray) -> list[str]:
        """The name of each of ``nodes``."""
        out = [""] * len(nodes)
        for s, sel, at in self._named_at(nodes):
            for j, n in zip(sel.tolist(), s.named_name[at].tolist()):
                out[j] = s.names[n]
        return out

    def node_name(self, node: int) -> str:
        return self.names_of(np.array([node], dtype=np.int64))[0]

    __call__ = node_name

    def kinds(self, nodes: np.ndarray) -> np.ndarray:
        return self._named("kind", nodes)

    def roles(self, nodes: np.ndarray) -> np.ndarray:
        return self._named("role", nodes)

    def in_checkpoint(self, nodes: np.ndarray) -> np.ndarray:
        return self._named("checkpoint", nodes)

    def p2p(self, nodes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(nodes), dtype=bool)
        for s, sel, at, there in self._located(nodes, "member"):
            out[sel] = self._p2p[np.where(there, s.instance[at] if len(s.instance) else -1, -1)]
        return out

    def foreign(self, nodes: np.ndarray) -> ForeignNodes:
        """``nodes`` (of other ranks than a task's) as the task's ``GraphNodes`` reads them."""
        return ForeignNodes(names=tuple(self.names_of(nodes)), kind=self.kinds(nodes), p2p=self.p2p(nodes),
                            role=self.roles(nodes), in_checkpoint=self.in_checkpoint(nodes))
