"""Hosts whose clocks disagree: each rank's clock offset, read from the collectives it shares.

A job across machines writes each rank's times on its host's clock, which NTP keeps only roughly in
step with the others (often 0.1 to a few ms apart). Every member of a blocking all-reduce, all-gather,
reduce-scatter or barrier finishes when the data is complete everywhere, within a few µs of the
others (NCCL kernel ends on one host: ±2 µs; gloo ops: about ±100 µs). So the median, over the
collectives two ranks share, of the difference of their end times is the difference of their clocks.
Ranks are put on the clock of the lowest rank they are joined to through shared collectives, and
groups that share none (pipeline stages on different hosts) through the GPU transfers between them,
when the recorded clocks make those transfers impossible; an offset is applied only when it stands
well above the noise of its own evidence, so ranks on one host keep their times to the nanosecond.
Without the alignment the skewed collectives look unreliable (members leaving before the last one
arrived) or, when the skew is smaller than the collective, the rank whose clock runs ahead looks late.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.graph.collectives import ARRIVAL_TOL_NS
from bottleneck_oracle.findings.finding import rank_ranges
from bottleneck_oracle.graph.path_nodes import p2p_nodes
from bottleneck_oracle.graph.graph import ExecGraph

__all__ = ["SKEW_MIN_NS", "ClockEstimate", "MemberTimes", "clock_offsets", "moved_clocks", "offsets_of",
           "symmetric_kinds"]

SKEW_MIN_NS = 50_000  # a clock difference below this is left alone: within what one host's ranks show
SKEW_NOISE = 5  # ...and it must stand this many times above the spread of the ends it was read from
MIN_SHARED = 3  # collectives two ranks must share for their difference to count
_SYMMETRIC = ("allreduce", "allgather", "reducescatter", "barrier")  # every member ends with the data


@dataclass(frozen=True, slots=True)
class ClockEstimate:
    """What the collectives say about each rank's clock.

    Args:
        offset_ns: int64[R] by rank, what its clock reads ahead of its reference rank's (0: left alone).
        reference: int64[R] by rank, the rank whose clock it is put on (itself when it shares none).
        evidence: int64[R] by rank, the collectives its offset was read from.
        spread_ns: int64[R] by rank, the median absolute deviation of its ends from the others' once
            aligned: what the offset stands above.
        transfers: int64[R] by rank, the GPU point-to-point transfers that joined its group of ranks to its
            reference's (0: joined by collectives, or not at all).
    """

    offset_ns: np.ndarray
    reference: np.ndarray
    evidence: np.ndarray
    spread_ns: np.ndarray
    transfers: np.ndarray

    def any(self) -> bool:
        """Whether some rank's clock must be moved."""
        return bool(np.any(self.offset_ns != 0))


@dataclass(frozen=True, slots=True)
class MemberTimes:
    """Every member of a collective instance, in node order: what the clocks are read from.

    Shapes:
        every field is a 1-D array of length M.
    """

    instance: np.ndarray  # int64
    rank: np.ndarray  # int64
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    symmetric: np.ndarray  # bool: an all-reduce, all-gather, reduce-scatter or barrier: every member ends with the data
    transfer: np.ndarray  # bool: one end of a GPU point-to-point transfer

    @classmethod
    def of(cls, g: ExecGraph) -> MemberTimes:
        """The members of ``g``'s collectives."""
        m = np.flatnonzero(g.collective >= 0)
        inst = g.collective[m].astype(np.int64)
        return cls(inst, g.rank[m].astype(np.int64), g.start_ns[m], g.end_ns[m], symmetric_kinds(g.collectives.kind)[inst],
                   (p2p_nodes(g) & g.trace.lanes.is_gpu[g.lane])[m])


def symmetric_kinds(kinds: tuple[str, ...]) -> np.ndarray:
    """bool per collective type of ``kinds``: every member ends with the data (all-reduce, all-gather,
    reduce-scatter, barrier)."""
    return np.array([k.startswith(_SYMMETRIC) for k in kinds], dtype=bool)


def _members(mt: MemberTimes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(instance, rank, end) of every member of a symmetric collective of two ranks or more, in
    (instance, rank) order."""
    m = np.flatnonzero(mt.symmetric)
    m = m[np.lexsort((mt.rank[m], mt.instance[m]))]
    return mt.instance[m], mt.rank[m], mt.end[m]


def _group_medians(key: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each distinct key, the median of its values, how many), the median of an even count rounded down."""
    order = np.lexsort((value, key))
    key, value = key[order], value[order]
    first = np.flatnonzero(np.append(True, key[1:] != key[:-1])) if len(key) else np.zeros(0, np.int64)
    count = np.diff(np.append(first, len(key)))
    return key[first], (value[first + (count - 1) // 2] + value[first + count // 2]) // 2, count


def _pair_differences(inst: np.ndarray, rank: np.ndarray, end: np.ndarray,
                      n_ranks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (lowest rank of an instance, another member's rank) sharing ``MIN_SHARED`` collectives or more:
    ``(a, b, median of b's end minus a's, collectives)``."""
    first = np.flatnonzero(np.append(True, inst[1:] != inst[:-1]))
    head = np.repeat(first, np.diff(np.append(first, len(inst))))
    other = np.flatnonzero(rank[head] != rank)
    key, diff, count = _group_medians(rank[head[other]] * n_ranks + rank[other], end[other] - end[head[other]])
    keep = count >= MIN_SHARED
    return key[keep] // n_ranks, key[keep] % n_ranks, diff[keep], count[keep]


def _spread(inst: np.ndarray, rank: np.ndarray, end: np.ndarray, offset: np.ndarray,
            n_ranks: int) -> tuple[np.ndarray, np.ndarray]:
    """Per rank: how many collectives it shares, and the median absolute deviation of its aligned ends
    from the median of its collective's."""
    adj = end - offset[rank]
    keys, mid, _ = _group_medians(inst, adj)
    dev = np.abs(adj - mid[np.searchsorted(keys, inst)])
    ranks, spread, evidence = _group_medians(rank, dev)
    out_spread, out_evidence = np.zeros(n_ranks, dtype=np.int64), np.zeros(n_ranks, dtype=np.int64)
    out_spread[ranks], out_evidence[ranks] = spread, evidence
    return out_evidence, out_spread


def clock_offsets(g: ExecGraph) -> ClockEstimate:
    """How far each rank's clock reads ahead of the lowest rank it shares collectives with (directly or
    through others), where that stands above the noise; 0 elsewhere."""
    return offsets_of(MemberTimes.of(g), int(g.rank.max()) + 1 if len(g) else 0)


def offsets_of(mt: MemberTimes, n_ranks: int) -> ClockEstimate:
    """``clock_offsets`` from the members' times, wherever they were read: one graph, or each rank's summary."""
    inst, rank, end = _members(mt)
    edges: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for a, b, d, _ in zip(*(x.tolist() for x in _pair_differences(inst, rank, end, n_ranks))):
        edges[a].append((b, d))
        edges[b].append((a, -d))
    offset = np.zeros(n_ranks, dtype=np.int64)
    reference = np.arange(n_ranks, dtype=np.int64)
    seen = np.zeros(n_ranks, dtype=bool)
    for root in range(n_ranks):  # breadth first from the lowest rank of each group of joined ranks
        if seen[root] or root not in edges:
            continue
        seen[root] = True
        queue = deque([root])
        while queue:
            a = queue.popleft()
            for b, d in edges[a]:
                if not seen[b]:
                    seen[b] = True
                    offset[b], reference[b] = offset[a] + d, root
                    queue.append(b)
    transfers = _join_by_transfers(mt, offset, reference)
    evidence, spread = _spread(inst, rank, end, offset, n_ranks)
    keep = (np.abs(offset) >= SKEW_MIN_NS) & (np.abs(offset) >= SKEW_NOISE * spread)
    return ClockEstimate(np.where(keep, offset, 0), reference, evidence, spread, transfers)


def _join_by_transfers(mt: MemberTimes, offset: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Joins groups of ranks that share no collective (pipeline stages on different hosts) through the GPU
    point-to-point transfers between them, whose two kernels end together: group B's clock against group A's
    is the median difference of those ends. A join is made only when the recorded clocks make most transfers
    impossible (under half with overlapping ends) and the joined ones make them possible (90%), so ranks of
    one host, whose transfers overlap as recorded, are never moved. ``offset`` and ``reference`` are updated;
    returns the transfers that joined each rank's group."""
    joined = np.zeros(len(offset), dtype=np.int64)
    m = np.flatnonzero(mt.transfer)
    m = m[np.lexsort((mt.rank[m], mt.instance[m]))]
    x, y = m[0:-1:2], m[1::2]  # the two ends of each transfer
    x, y = x[mt.instance[x] == mt.instance[y]], y[mt.instance[x] == mt.instance[y]]
    rx, ry = mt.rank[x], mt.rank[y]
    while True:
        gx, gy = reference[rx], reference[ry]
        lo, hi = np.minimum(gx, gy), np.maximum(gx, gy)
        across = np.flatnonzero(lo != hi)
        if not len(across):
            return joined
        a = int(lo[across].min())  # the group of the lowest rank takes the others in
        for b in np.unique(hi[across][lo[across] == a]).tolist():
            sel = across[(lo[across] == a) & (hi[across] == b)]
            if len(sel) < MIN_SHARED:
                continue
            ua = np.where(gx[sel] == a, x[sel], y[sel])  # the end in group a, the end in group b
            ub = np.where(gx[sel] == a, y[sel], x[sel])
            sa, ea = mt.start[ua] - offset[mt.rank[ua]], mt.end[ua] - offset[mt.rank[ua]]
            sb, eb = mt.start[ub] - offset[mt.rank[ub]], mt.end[ub] - offset[mt.rank[ub]]
            d = int(_group_medians(np.zeros(len(sel), dtype=np.int64), eb - ea)[1][0])  # the ends' median difference
            overlap = lambda shift: float(np.mean(np.minimum(ea, eb - shift) + ARRIVAL_TOL_NS  # noqa: E731
                                                  >= np.maximum(sa, sb - shift)))
            if overlap(0) < 0.5 and overlap(d) >= 0.9:
                group = reference == b
                offset[group] += d
                reference[group] = a
                joined[group] = len(sel)
                break
        else:
            return joined  # no group could be joined to a's



def moved_clocks(c: ClockEstimate) -> str:
    """What was moved, per reference rank: ``against rank 0's clock, ranks 8-15 read 3.000 ms ahead
    (...)``, and the groups of ranks whose clock against the first could not be read."""
    groups: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    moved = np.flatnonzero(c.offset_ns).tolist()
    for r in moved:
        groups[int(c.reference[r])][round(int(c.offset_ns[r]) / 1000)].append(r)
    parts = []
    for ref, by_us in sorted(groups.items()):
        each = [f"rank{'s' if len(ranks) > 1 else ''} {rank_ranges(ranks)} read {abs(us) / 1000:.3f} ms "
                f"{'ahead' if us > 0 else 'behind'}" for us, ranks in sorted(by_us.items(), key=lambda kv: kv[1][0])]
        parts.append(f"against rank {ref}'s clock, {', '.join(each)}")
    shared = min((int(c.evidence[r]) for r in moved), default=0)
    spread = max((int(c.spread_ns[r]) for r in moved), default=0) / 1e6
    out = f"{'; '.join(parts)} (each from {shared}+ shared collectives, their ends within {spread:.3f} ms once aligned)"
    by_transfers = np.flatnonzero(c.transfers).tolist()
    if by_transfers:
        out += (f"; ranks {rank_ranges(by_transfers)} share no all-reduce, all-gather or reduce-scatter with rank "
                f"{int(c.reference[by_transfers[0]])}'s "
                f"and were joined through {int(c.transfers[by_transfers].min())}+ GPU point-to-point transfers, "
                "whose two ends finish together")
    roots = sorted(set(c.reference[c.evidence > 0].tolist()))
    for root in roots[1:] if moved else []:  # pipeline stages joined by transfers only, say
        apart = np.flatnonzero((c.reference == root) & (c.evidence > 0)).tolist()
        out += (f"; ranks {rank_ranges(apart)} share no all-reduce, all-gather or reduce-scatter with rank {roots[0]}'s, "
                "and no GPU transfer that says otherwise: their clock against it is left as recorded")
    return out
