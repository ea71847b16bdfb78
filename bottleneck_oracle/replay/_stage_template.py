"""The traced 1F1B step of each pipeline rank, for ``structural.microbatches``: its forward and
backward units, what they cost, how they wait for their neighbours, and the work outside them.

A unit is one ``## forward ##`` / ``## backward ##`` range (``## forward mbK ##`` where numbered):
its CPU span, the GPU work its launches started, when its receive and its send were issued, and
the lag a receive adds once both sides are ready (the transfer, measured where it bound).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.names import p2p_direction
from bottleneck_oracle.graph.types import EdgeType, NodeKind, Role
from bottleneck_oracle.errors import ConfigError

__all__ = ["StageStep", "Template", "measure_steps"]

UNIT_RE = re.compile(r"^## (forward|backward)(?: mb(\d+))? ##$")
_GPU = (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET)
_CALL_DEPTH = 4  # c10d::send → record_param_comms → ... → the launch call


@dataclass(frozen=True, slots=True)
class Template:
    """One unit kind (forward or backward) of one rank in one step, the mean of its micro-batches.

    Times are ns. ``busy``: GPU busy time (compute, copies, blocking collectives without their
    wait; on a CPU pipeline, the part of its ops' time beyond their names' least); ``idle``: the
    GPU's own gaps between that work (on a CPU pipeline, the rest of its time); ``lead`` /
    ``tail``: offsets from the unit's CPU start at which its first / last work can start;
    ``last``: that last work's time; ``cpu``: its CPU span; ``recv``: offset from the previous
    unit's CPU end at which its receive is issued; ``send``: offset from its own CPU end at which
    its send is; ``p2p``: the lag a receive adds once both sides are ready (-1: none measured);
    ``p2p_excess``: by micro-batch, what its receive took beyond ``p2p`` (a slow link).
    """

    busy: float
    idle: float
    lead: float
    tail: float
    last: float
    cpu: float
    recv: float
    send: float
    p2p: float
    p2p_excess: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class StageStep:
    """One rank's traced step, reduced to what a 1F1B re-schedule needs (ns, from the window start).

    ``pre_cpu``: CPU start of the first unit; ``pre_gpu``: end of the GPU work before it;
    ``between``: CPU time between two units by (first is a forward, second is a forward);
    ``post_gpu``: completion after the last unit's GPU work; ``post_cpu``: CPU work after the
    last unit's CPU end, up to the final blocking sync. ``on_cpu``: the units are CPU work (a gloo
    pipeline): the "GPU" times are its thread's, and the CPU waits with it.
    """

    rank: int
    step: int
    window_ns: int
    microbatches: int
    on_cpu: bool
    forward: Template
    backward: Template
    pre_cpu: float
    pre_gpu: float
    between: dict[tuple[bool, bool], float]
    post_gpu: float
    post_cpu: float


@dataclass(frozen=True, slots=True)
class _Context:
    """Per-trace arrays every step's measurement reads."""

    src: np.ndarray  # launch calls of unit work, sorted by (rank, start)
    dst: np.ndarray  # the work each launched
    rank: np.ndarray  # rank of each call
    p2p_start: np.ndarray  # launch calls of p2p transfers, sorted by (rank, start): start
    p2p_rank: np.ndarray
    p2p_send: np.ndarray  # bool: a send (else a receive)
    busy_ns: np.ndarray  # int64[N]: a node's time, a collective member's without its wait
    latency: int  # shortest delay from a launch call's start to its work's start
    gap: int  # shortest gap between consecutive work on a stream
    own_ns: np.ndarray  # int64[N]: a node's time not covered by its children
    floor_ns: np.ndarray  # int64[N]: the least own time of any node of its name (its fixed cost)


@dataclass(frozen=True, slots=True)
class _Units:
    """The units of one (rank, step) in trace order."""

    forward: np.ndarray  # bool
    mb: np.ndarray  # int64
    cpu_start: np.ndarray  # int64
    cpu_end: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray
    launch_bound: np.ndarray  # bool: its first work started when its launch let it
    recv_at: np.ndarray  # when its receive was issued (on the GPU, with GPU work), or its CPU start
    send_at: np.ndarray  # when its send was issued, or its CPU end
    ready_at: np.ndarray  # when its CPU could have started it (with GPU work: its CPU start)
    on_cpu: bool  # no unit launched GPU work: the units run on the CPU (a gloo pipeline)
    stats: dict[str, np.ndarray]  # float64 per Template field but recv, p2p and p2p_excess


def _unit_nodes(a: Analysis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Annotation nodes that are units, whether each is a forward, and its micro-batch (-1: by order)."""
    g = a.graph
    match = [UNIT_RE.match(s) for s in g.trace.strings]
    is_unit = np.array([m is not None for m in match], dtype=bool)
    nodes = np.flatnonzero(is_unit[g.name] & (g.kind == NodeKind.ANNOTATION) & (g.step_row >= 0))
    found = [match[i] for i in g.name[nodes].tolist()]
    fwd = np.array([m is not None and m[1] == "forward" for m in found], dtype=bool)
    mb = np.array([int(m[2]) if m is not None and m[2] else -1 for m in found], dtype=np.int64)
    return nodes, fwd, mb


def _direction(a: Analysis, call: int) -> str:
    g = a.graph
    node = call
    for _ in range(_CALL_DEPTH):
        if node < 0:
            break
        found = p2p_direction(g.trace.strings[g.name[node]])
        if found:
            return found
        node = int(g.parent[node])
    return ""


def _context(a: Analysis) -> _Context:
    g = a.graph
    src, dst = g.edges_of(EdgeType.LAUNCH)
    p2p_kind = np.array([k == "sendrecv" for k in g.collectives.kind] + [False], dtype=bool)
    is_p2p = (g.kind[dst] == NodeKind.COMM) & p2p_kind[g.collective[dst]]
    # a tensor-parallel all-reduce inside a unit holds up its compute stream; a p2p transfer is its wait
    work = np.isin(g.kind[dst], _GPU) | ((g.kind[dst] == NodeKind.COMM) & ~is_p2p & (g.collective >= 0)[dst])
    order = np.lexsort((g.start_ns[src[work]], g.rank[src[work]]))
    s, d = src[work][order], dst[work][order]
    p = src[is_p2p][np.lexsort((g.start_ns[src[is_p2p]], g.rank[src[is_p2p]]))]
    inst = g.collective
    member = np.flatnonzero(inst >= 0)
    last_start = np.full(len(g.collectives), np.iinfo(np.int64).min)
    first_end = np.full(len(g.collectives), np.iinfo(np.int64).max)
    np.maximum.at(last_start, inst[member], g.start_ns[member])
    np.minimum.at(first_end, inst[member], g.end_ns[member])
    busy = g.dur_ns.copy()
    busy[member] = np.clip(first_end[inst[member]] - last_start[inst[member]], 0, g.dur_ns[member])
    lane = np.flatnonzero(g.trace.lanes.is_gpu[g.lane] & (g.parent < 0))
    lane = lane[np.lexsort((g.start_ns[lane], g.lane[lane]))]
    gaps = (g.start_ns[lane[1:]] - g.end_ns[lane[:-1]])[g.lane[lane[1:]] == g.lane[lane[:-1]]]
    gaps = gaps[gaps >= 0]
    child = np.flatnonzero(g.parent >= 0)
    own = g.dur_ns.copy()
    np.subtract.at(own, g.parent[child], g.dur_ns[child])
    own = np.maximum(own, 0)
    floor = np.full(len(g.trace.strings), np.iinfo(np.int64).max)
    np.minimum.at(floor, g.name, own)
    return _Context(
        own_ns=own, floor_ns=floor[g.name],
        src=s, dst=d, rank=g.rank[s], p2p_start=g.start_ns[p], p2p_rank=g.rank[p],
        p2p_send=np.array([_direction(a, int(c)) == "send" for c in p], dtype=bool), busy_ns=busy,
        latency=int(max((g.start_ns[d] - g.start_ns[s]).min(), 0)) if len(s) else 0,
        gap=int(gaps.min()) if len(gaps) else 0,
    )


def _p2p_times(c: _Context, rank: int, cs: np.ndarray, ce: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: when its receive (issued just before it) and its send (just after it) reached the
    GPU; its CPU start and end where it has none."""
    lo, hi = np.searchsorted(c.p2p_rank, rank), np.searchsorted(c.p2p_rank, rank, side="right")
    start, send = c.p2p_start[lo:hi], c.p2p_send[lo:hi]
    recv_at, send_at = cs.astype(np.float64), ce.astype(np.float64)
    before = np.concatenate([[np.iinfo(np.int64).min], ce[:-1]])
    after = np.concatenate([cs[1:], [np.iinfo(np.int64).max]])
    for i in range(len(cs)):
        r = np.flatnonzero(~send & (start > before[i]) & (start <= cs[i]))
        s = np.flatnonzero(send & (start >= ce[i]) & (start < after[i]))
        recv_at[i] = start[r[-1]] + c.latency if len(r) else recv_at[i]
        send_at[i] = start[s[0]] + c.latency if len(s) else send_at[i]
    return recv_at, send_at


def _cpu_ready(a: Analysis, c: _Context, row: int, unit: np.ndarray) -> np.ndarray:
    """Per unit of a CPU pipeline: when it could have started had its input been there, the end of
    the previous unit (or the window's start) plus the least time of each op between them (a
    blocking receive's op holds its wait)."""
    g = a.graph
    lane, depth = g.lane[unit[0]], g.depth[unit[0]]
    ops = np.flatnonzero((g.step_row == row) & (g.lane == lane) & (g.depth == depth))
    ops = ops[np.argsort(g.start_ns[ops], kind="stable")]
    cost = np.cumsum(np.concatenate([[0], np.minimum(c.floor_ns, g.dur_ns)[ops]]))
    prev = np.concatenate([[g.steps.start_ns[row]], g.end_ns[unit[:-1]]])
    lo = np.searchsorted(g.start_ns[ops], prev, side="left")
    hi = np.searchsorted(g.start_ns[ops], g.start_ns[unit], side="left")
    return (prev + cost[hi] - cost[lo]).astype(np.float64)


def _cpu_split(a: Analysis, c: _Context, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per CPU unit: its time beyond every op's least time of its name (the part that grows with the
    micro-batch), and the rest (op dispatch floors and the Python between ops: a fixed cost)."""
    g = a.graph
    inside = np.flatnonzero((g.lane == g.lane[unit[0]]) & (g.depth > g.depth[unit[0]]))
    inside = inside[np.argsort(g.start_ns[inside], kind="stable")]
    lo = np.searchsorted(g.start_ns[inside], g.start_ns[unit])
    hi = np.searchsorted(g.start_ns[inside], g.end_ns[unit])
    extra = np.cumsum(np.concatenate([[0], (c.own_ns - np.minimum(c.own_ns, c.floor_ns))[inside]]))
    scalable = (extra[hi] - extra[lo]).astype(np.float64)
    return scalable, g.dur_ns[unit] - scalable


def _collect_units(a: Analysis, c: _Context, row: int, nodes: np.ndarray, fwd: np.ndarray,
                   mb: np.ndarray) -> _Units:
    """The units of step row ``row`` with the GPU work their CPU spans launched."""
    g, pg = a.graph, a.points
    mine = np.flatnonzero(g.step_row[nodes] == row)
    mine = mine[np.argsort(g.start_ns[nodes[mine]], kind="stable")]
    unit, fwd, mb = nodes[mine], fwd[mine], mb[mine].copy()
    for kind in (True, False):  # unnumbered units: 1F1B runs forwards, and backwards, in micro-batch order
        at = np.flatnonzero((fwd == kind) & (mb < 0))
        mb[at] = np.arange(len(at))
    rank = int(g.steps.rank[row])
    lo_r = np.searchsorted(c.rank, rank)
    call_start = g.start_ns[c.src[lo_r:np.searchsorted(c.rank, rank, side="right")]]
    cs, ce = g.start_ns[unit], g.end_ns[unit]
    lo = lo_r + np.searchsorted(call_start, cs)
    hi = lo_r + np.searchsorted(call_start, ce, side="right")
    n = len(unit)
    gs, ge = cs.copy(), ce.copy()
    stats = {k: np.zeros(n) for k in ("busy", "idle", "lead", "tail", "last")}
    stats["busy"] = (ce - cs).astype(np.float64)  # no GPU work: the unit is CPU work
    stats["cpu"] = (ce - cs).astype(np.float64)
    recv_at, send_at = _p2p_times(c, rank, cs, ce)
    stats["send"] = send_at - ce
    bound = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(hi > lo).tolist():
        work = c.dst[lo[i]:hi[i]]
        first = work[np.argmin(g.start_ns[work])]
        edge = pg.binding[2 * first]
        bound[i] = edge >= 0 and pg.origin[edge] == EdgeType.LAUNCH
        gs[i], ge[i] = g.start_ns[first], g.end_ns[work].max()
        stats["busy"][i] = c.busy_ns[work].sum()
        stats["idle"][i] = c.gap * (len(work) - 1)
        stats["lead"][i] = g.start_ns[c.src[lo[i]]] - cs[i] + c.latency
        stats["tail"][i] = g.start_ns[c.src[hi[i] - 1]] - cs[i] + c.latency
        stats["last"][i] = c.busy_ns[work[-1]]
    on_cpu = bool((hi <= lo).all())
    ready = cs.astype(np.float64)
    if on_cpu and n:
        ready = _cpu_ready(a, c, row, unit)
        stats["busy"], stats["idle"] = _cpu_split(a, c, unit)
    return _Units(fwd, mb, cs, ce, gs, ge, bound, recv_at, send_at, ready, on_cpu, stats)


def _stage_links(a: Analysis) -> dict[int, tuple[int, int]]:
    """rank → (previous-stage rank, next-stage rank), -1 at the ends, from the pipeline groups the trace names."""
    out: dict[int, tuple[int, int]] = {}
    for info in a.graph.trace.ranks:
        for pg in info.process_groups:
            if pg.description == "PIPELINE_MODEL_PARALLEL_GROUP" and len(pg.ranks) > 1:
                r = pg.ranks
                for i, rank in enumerate(r):
                    out[rank] = (r[i - 1] if i else -1, r[i + 1] if i + 1 < len(r) else -1)
    return out


def _links_from_p2p(a: Analysis, warmup: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Pipeline neighbours from the ranks that exchange p2p messages: a stage runs one warm-up
    forward more than the next."""
    g = a.graph
    p2p = np.flatnonzero(g.collective >= 0)
    p2p = p2p[np.array([g.collectives.kind[i] == "sendrecv" for i in g.collective[p2p]], dtype=bool)]
    pairs = set()
    for inst in np.unique(g.collective[p2p]).tolist():
        ranks = sorted(set(g.rank[p2p[g.collective[p2p] == inst]].tolist()))
        if len(ranks) == 2:
            pairs.add(tuple(ranks))
    out: dict[int, tuple[int, int]] = {r: (-1, -1) for r in warmup}
    for x, y in pairs:
        if x in warmup and y in warmup and abs(warmup[x] - warmup[y]) == 1:
            first, second = (x, y) if warmup[x] > warmup[y] else (y, x)
            out[first] = (out[first][0], second)
            out[second] = (first, out[second][1])
    return out


def _between(u: _Units) -> dict[tuple[bool, bool], float]:
    """Mean CPU work between consecutive units per (forward?, forward?) pair; a pair the step lacks
    from the others (a gap is the send after the first plus the receive before the second)."""
    gaps = u.ready_at[1:] - u.cpu_end[:-1]  # with GPU work the CPU never waits: the whole gap
    pairs = list(zip(u.forward[:-1].tolist(), u.forward[1:].tolist()))
    out = {p: float(np.mean([x for x, q in zip(gaps.tolist(), pairs) if q == p])) for p in set(pairs)}
    for x, y in ((True, True), (True, False), (False, True), (False, False)):
        if (x, y) not in out and {(x, not y), (not x, y), (not x, not y)} <= out.keys():
            out[(x, y)] = out[(x, not y)] + out[(not x, y)] - out[(not x, not y)]
    mean = float(gaps.mean()) if len(gaps) else 0.0
    return {(x, y): out.get((x, y), mean) for x in (True, False) for y in (True, False)}


def _p2p_lags(u: _Units, peer_units: dict[bool, _Units | None], gpu_free: int) -> dict[bool, dict[int, float]]:
    """By kind and micro-batch, the lag each receive added once both sides were ready, where it
    bound (not the launch); ``gpu_free``: the end of the GPU work before the first unit."""
    out: dict[bool, dict[int, float]] = {True: {}, False: {}}
    prev_end = np.concatenate([[gpu_free], u.gpu_end[:-1]])
    for i in np.flatnonzero(~u.launch_bound).tolist():
        fwd = bool(u.forward[i])
        v = peer_units[fwd]
        j = np.flatnonzero((v.forward == fwd) & (v.mb == u.mb[i])) if v is not None else []
        if not len(j):
            continue
        k = int(j[0])
        here = max(prev_end[i], u.recv_at[i])
        there = max(v.gpu_end[k], v.send_at[k])
        out[fwd][int(u.mb[i])] = float(max(u.gpu_start[i] - max(here, there), 0))
    return out


def _template(u: _Units, at: np.ndarray, lags: dict[int, float], cpu_ref: np.ndarray) -> Template:
    """The mean of the units ``at``; ``cpu_ref``: per unit, the CPU end its receive is issued after."""
    mean = {k: float(v[at].mean()) for k, v in u.stats.items()}
    base = (float(np.mean(list(lags.values()))) if u.on_cpu else min(lags.values())) if lags else -1.0
    # a CPU unit that did not wait shows no lag of its own: only a GPU pipeline's excess is a slow transfer
    excess = tuple(0.0 if u.on_cpu else lags.get(m, base) - base
                   for m in range(int(u.mb[at].max()) + 1 if len(at) else 0))
    return Template(**mean, recv=float((u.recv_at - cpu_ref)[at].mean()), p2p=base, p2p_excess=excess)


def _final_sync_start(a: Analysis, row: int, after: int) -> int:
    """Start of the step's last blocking sync after ``after`` (the step's CPU end if none)."""
    g = a.graph
    sync = np.flatnonzero((g.step_row == row) & (g.role == Role.SYNC) & (g.start_ns >= after))
    return int(g.start_ns[sync].max()) if len(sync) else int(g.steps.cpu_end_ns[row])


def _links(a: Analysis, units: dict[int, _Units]) -> dict[int, tuple[int, int]]:
    st = a.graph.steps
    warmup = {int(st.rank[i]): int(np.argmin(u.forward)) - 1 for i, u in units.items()}  # 1F1B: then F, B, ...
    links = _stage_links(a) or _links_from_p2p(a, warmup)
    links = {r: links[r] for r in warmup if r in links and links[r] != (-1, -1)}
    if not links:
        raise ConfigError("microbatches: the trace has no pipeline stages (no forward/backward ranges "
                          "exchanged between ranks by point-to-point sends)")
    for r, (_, nxt) in links.items():
        if nxt < 0 and warmup[r] > 0:
            raise ConfigError(f"microbatches: rank {r}, the last stage, runs {warmup[r]} forwards before its "
                              "first backward: an interleaved schedule, which is not supported")
    return links


def measure_steps(a: Analysis) -> tuple[list[StageStep], dict[int, tuple[int, int]]]:
    """Every complete step of every pipeline rank, and each rank's (previous, next) stage ranks.

    Raises:
        ConfigError: no pipeline stages (no forward/backward units exchanged between ranks), or an
            interleaved schedule.
    """
    g, st = a.graph, a.graph.steps
    nodes, fwd, mb = _unit_nodes(a)
    c = _context(a)
    rows = [i for i in range(len(st)) if st.step[i] >= 0 and (int(st.step[i]), int(st.rank[i])) not in a.partial_steps]
    units = {i: _collect_units(a, c, i, nodes, fwd, mb) for i in rows}
    units = {i: u for i, u in units.items() if len(u.forward) and u.forward.sum() == (~u.forward).sum()}
    links = _links(a, units)
    by_key = {(int(st.rank[i]), int(st.step[i])): (i, u) for i, u in units.items() if int(st.rank[i]) in links}
    out = []
    for (rank, step), (row, u) in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        peers = {fwd: by_key.get((links[rank][0 if fwd else 1], step), (0, None))[1] for fwd in (True, False)}
        w = int(st.start_ns[row])
        before = np.flatnonzero((g.rank == rank) & (g.step_row == row) & np.isin(g.kind, _GPU)
                                & (g.start_ns < u.gpu_start[0]))
        pre_gpu = max(int(g.end_ns[before].max()) - w, 0) if len(before) else 0
        lags = _p2p_lags(u, peers, w + pre_gpu)
        last_cpu = int(u.cpu_end[-1])
        cpu_ref = np.concatenate([[u.ready_at[0]], u.cpu_end[:-1]])
        out.append(StageStep(
            rank=rank, step=step, window_ns=w, microbatches=int(u.forward.sum()), on_cpu=u.on_cpu,
            forward=_template(u, np.flatnonzero(u.forward), lags[True], cpu_ref),
            backward=_template(u, np.flatnonzero(~u.forward), lags[False], cpu_ref),
            pre_cpu=float(u.ready_at[0] - w), pre_gpu=float(pre_gpu),
            between=_between(u), post_gpu=float(st.end_ns[row] - u.gpu_end[-1]),
            post_cpu=float(max(_final_sync_start(a, row, last_cpu) - last_cpu, 0)),
        ))
    return out, links
