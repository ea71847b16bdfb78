"""The trace's collectives for ``structural.data_parallel``: which carry gradients, which run over
the whole job, which are pipeline sends, and their transfers rescaled to another data-parallel
degree, on the traced interconnect inside a node and over the network once a group spans nodes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.types import NodeKind
from bottleneck_oracle.traces.events import ProcessGroup
from bottleneck_oracle.replay._ring import (
    GPUS_PER_NODE,
    Layout,
    Network,
    RingFit,
    describe_fit,
    fit_ring,
    nodes_spanned,
    nvlink_of,
    read_layout,
)

__all__ = ["GRADIENT_KINDS", "current_degree", "gradient_members", "process_groups", "rescale_rings", "trace_layout"]

GRADIENT_KINDS = ("allreduce", "reducescatter", "allgather")
_NOT_DATA_PARALLEL = ("TENSOR", "PIPELINE", "EXPERT", "CONTEXT", "SEQUENCE")  # model-parallel group descs
_DTYPE_BYTES = {"BFloat16": 2, "Half": 2, "Float": 4, "Double": 8, "Int": 4, "Long": 8, "Short": 2,
                "Byte": 1, "Char": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1}
# how the assumptions name each kind of rescaled group: one, several, and what runs over the network
_ROLES = {"gradient": ("data-parallel group", "data-parallel groups", "its ring runs", "their rings run"),
          "world": ("world group", "world groups", "its ring runs", "their rings run"),
          "p2p": ("pipeline link", "pipeline links", "its sends run", "their sends run")}
_OUTLIER = 2.0  # an instance slower than this times its fit is a delay, not the link
Spans = dict[str, tuple[int, int]]  # process group name → nodes it spans (traced, at the new degree)


def process_groups(a: Analysis) -> dict[str, ProcessGroup]:
    """Every process group the ranks' files record, by name."""
    out: dict[str, ProcessGroup] = {}
    for info in a.graph.trace.ranks:
        for pg in info.process_groups:
            out.setdefault(pg.name, pg)
    return out


def _pg_names(a: Analysis, nodes: np.ndarray) -> np.ndarray:
    g = a.graph
    return np.array([g.trace.strings[p] for p in g.trace.events.pg_name[g.event[nodes]]], dtype=object)


def _collective_nodes(a: Analysis, kinds: tuple[str, ...]) -> np.ndarray:
    """Comm nodes of reliably matched collectives of ``kinds``."""
    g = a.graph
    of_kind = np.array([k in kinds for k in g.collectives.kind] + [False])
    reliable = np.append(g.collectives.reliable, False)
    return np.flatnonzero(of_kind[g.collective] & reliable[g.collective] & (g.kind == NodeKind.COMM))


def gradient_members(a: Analysis) -> np.ndarray:
    """Comm nodes of reliable gradient collectives: the data-parallel group's all-reduces,
    reduce-scatters and all-gathers (a group described as data-parallel when the trace names
    one, else any group not described as tensor-, pipeline-, expert- or context-parallel)."""
    member = _collective_nodes(a, GRADIENT_KINDS)
    groups = process_groups(a)
    group = [groups[n].description.upper() if n in groups else "" for n in _pg_names(a, member)]
    named = np.array(["DATA_PARALLEL" in d for d in group], dtype=bool)
    if named.any():
        return member[named]
    model_parallel = np.array([any(w in d for w in _NOT_DATA_PARALLEL) for d in group], dtype=bool)
    return member[~model_parallel]


def _world_members(a: Analysis, groups: dict[str, ProcessGroup], gradient: np.ndarray, world: int) -> np.ndarray:
    """Collectives over the whole job that are not the gradients' (an extra all-reduce over every
    rank): the world grows with the data-parallel degree."""
    member = np.setdiff1d(_collective_nodes(a, GRADIENT_KINDS), gradient)
    size = a.graph.trace.events.group_size[a.graph.event[member]]
    whole = [(pg.description == "default_pg" or len(pg.ranks) == world) if pg else s == world
             for pg, s in zip((groups.get(n) for n in _pg_names(a, member)), size)]
    return member[np.array(whole, dtype=bool)]


def _message_bytes(a: Analysis, nodes: np.ndarray) -> np.ndarray:
    """Bytes of each collective's message (4-byte elements where the dtype is not recorded; 1 byte
    where the size is not either: then only ratios of the ring cost are known)."""
    ev = a.graph.trace.events
    rows = a.graph.event[nodes]
    size = np.array([_DTYPE_BYTES.get(a.graph.trace.strings[d], 4) for d in ev.dtype[rows]], dtype=np.float64)
    return np.maximum(ev.nelems[rows], 1).astype(np.float64) * size


def _transfer_s(a: Analysis, instances: np.ndarray) -> np.ndarray:
    """Transfer time of each instance: from its last member's arrival to its first member's end."""
    g = a.graph
    member = np.flatnonzero(np.isin(g.collective, instances))
    slot = np.searchsorted(instances, g.collective[member])
    last_start = np.full(len(instances), np.iinfo(np.int64).min)
    first_end = np.full(len(instances), np.iinfo(np.int64).max)
    np.maximum.at(last_start, slot, g.start_ns[member])
    np.minimum.at(first_end, slot, g.end_ns[member])
    return np.maximum(first_end - last_start, 0) / 1e9


def current_degree(a: Analysis, members: np.ndarray) -> int:
    """The data-parallel degree: the gradient collectives' group size (else their member count)."""
    g = a.graph
    size = g.trace.events.group_size[g.event[members]]
    if (size > 1).any():
        return int(np.bincount(np.maximum(size, 0)).argmax())
    return int(np.bincount(g.collectives.members[g.collective[members]]).argmax())


def _spans(a: Analysis, nodes: np.ndarray, groups: dict[str, ProcessGroup],
           span: Callable[[tuple[int, ...]], tuple[int, int]]) -> tuple[Spans, np.ndarray, np.ndarray]:
    """Nodes each process group of ``nodes`` spans, traced and at the new degree, per group and per node."""
    names = _pg_names(a, nodes)
    by_group = {n: span(groups[n].ranks if n in groups else ()) for n in dict.fromkeys(names)}
    now = np.array([by_group[n][0] for n in names], dtype=np.int64)
    new = np.array([by_group[n][1] for n in names], dtype=np.int64)
    return by_group, now, new


def _scale_ring(a: Analysis, nodes: np.ndarray, sizes: tuple[int, int], spans: tuple[np.ndarray, np.ndarray],
                links: tuple[Network | None, Network | None], node_scale: np.ndarray, what: str = "",
                bytes_factor: float = 1.0) -> list[str]:
    """Sets each collective's ratio of ring costs, new over traced, in ``node_scale``; returns the fits.

    Instances whose group spans nodes in the trace and those inside one are fitted apart; one that
    leaves its node at the new degree takes the cost of ``links[0]`` (the network, where known)
    instead of its fit's, one that comes into a node the cost of ``links[1]`` (the links inside it).
    """
    g = a.graph
    now, new = sizes
    kinds = np.array([g.collectives.kind[i] for i in g.collective[nodes]], dtype=object)
    notes = []
    for kind in dict.fromkeys(kinds):
        sel = np.flatnonzero(kinds == kind)
        instances, first = np.unique(g.collective[nodes[sel]], return_index=True)
        nbytes = _message_bytes(a, nodes[sel[first]])
        t_s = _transfer_s(a, instances)
        crossed, crosses = spans[0][sel[first]] > 1, spans[1][sel[first]] > 1
        ratio = np.ones(len(instances), dtype=np.float64)
        for across in (False, True):
            part = crossed == across
            if not part.any():
                continue
            fit, usual = _robust_fit(kind, now, nbytes[part], t_s[part])
            fitted_now = np.maximum(fit.time_s(nbytes[part], now), 1e-15)
            target = fit.time_s(nbytes[part] * bytes_factor, new)
            # the trace shows only one side of the node's edge: the other side's cost is the table's
            moves = crosses[part] != across
            other = links[1] if across else links[0]
            if other is not None and moves.any():
                target[moves] = other.fit(kind).time_s(nbytes[part][moves] * bytes_factor, new)
            # each instance keeps its traced deviation from the fit: noise in proportion, and a delay far
            # beyond the fit (a slow link, an injected stall) as the time it added, not scaled with the link
            t_part = np.maximum(t_s[part], 1e-15)
            # (a group of one rank moves nothing: no delay survives it)
            ratio[part] = np.where(usual | (new <= 1), target / fitted_now, (target + t_part - fitted_now) / t_part)
            notes.append(describe_fit(fit, what + (", across nodes" if across else "")))
            if (~usual).any():
                notes.append(f"{int((~usual).sum())} {kind} instance(s) took over {_OUTLIER:g}x the fit: left out of "
                             "it, their extra time is kept as a fixed delay")
        per_instance = np.ones(len(g.collectives), dtype=np.float64)
        per_instance[instances] = ratio
        node_scale[nodes[sel]] = per_instance[g.collective[nodes[sel]]]
    return notes


def _robust_fit(kind: str, n: int, nbytes: np.ndarray, t_s: np.ndarray) -> tuple[RingFit, np.ndarray]:
    """The ring fit of the usual instances, and bool[len]: which are usual (within ``_OUTLIER`` of the fit).

    An instance far slower than the rest (an injected slow send, a stalled link) would drag a
    least-squares or pooled bandwidth toward it; it is left out and the fit taken again.
    """
    usual = np.ones(len(t_s), dtype=bool)
    for _ in range(4):
        fit = fit_ring(kind, n, nbytes[usual], t_s[usual])
        within = t_s <= _OUTLIER * fit.time_s(nbytes, n)
        if (within == usual).all() or not within.any():
            break
        usual = within
    return fit, usual


def _subject(role: str, at: str, moving: list[int], groups: int) -> tuple[str, str]:
    """("the data-parallel group at 16 spans 2 nodes", "its ring runs") for the groups that move."""
    one, several, its, their = _ROLES[role]
    nodes = max(moving)
    if len(moving) < groups:
        where = f"span up to {nodes} nodes" if nodes > 1 else "fit in one node"
        return f"{len(moving)} of {groups} {several} at {at} {where}", their
    if groups == 1:
        return f"the {one} at {at} " + (f"spans {nodes} nodes" if nodes > 1 else "fits in one node"), its
    return f"the {several} at {at} " + (f"span {nodes} nodes" if nodes > 1 else "fit in one node"), their


def _network_notes(role: str, at: str, spans: Spans, links: tuple[Network | None, Network | None],
                   devices: set[str]) -> list[str]:
    """What the groups that leave their node (or come into one) at the new degree run over, in words."""
    gpu = ", ".join(sorted(devices)) or "none recorded"
    notes = []
    leaving = [new for now, new in spans.values() if now == 1 < new]
    if leaving:
        subject, ring = _subject(role, at, leaving, len(spans))
        if links[0] is not None:
            notes.append(f"{subject}: {ring} over the network at {links[0].describe('the trace shows no network')}")
        else:
            notes.append(f"{subject}: {ring} over the network, which the trace does not show and the table has no "
                         f"numbers for its GPU ({gpu}); the traced interconnect is kept, so the step time is a lower "
                         "bound (net_gbps and net_latency_us give the network)")
    entering = [new for now, new in spans.values() if now > 1 == new]
    if entering:
        subject, ring = _subject(role, at, entering, len(spans))
        if links[1] is not None:
            notes.append(f"{subject}: {ring} over NVLink at {links[1].describe('the trace shows only the network')}")
        else:
            notes.append(f"{subject}, but the trace shows only the network and the table has no numbers for its "
                         f"GPU's links inside a node ({gpu}): the traced network is kept, so the step time is an "
                         "upper bound")
    if any(now > 1 and new > 1 for now, new in spans.values()):
        notes.append(f"the {_ROLES[role][1]} that span nodes in the trace and at {at} keep the fit of the traced "
                     "network")
    return notes


def _world_size(a: Analysis) -> int:
    return max([len(a.graph.trace.ranks)] + [info.world_size or 0 for info in a.graph.trace.ranks])


def trace_layout(a: Analysis, members: np.ndarray, current: int, dp: int) -> Layout:
    """Where the traced job's ranks sit and where they go at ``dp``, from the gradient groups' ranks."""
    groups = process_groups(a)
    ranks = [groups[n].ranks for n in dict.fromkeys(_pg_names(a, members)) if n in groups]
    return read_layout(ranks, current, dp, _world_size(a))


def rescale_rings(a: Analysis, members: np.ndarray, layout: Layout, net: Network | None, factor: float,
                  node_scale: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Rescales the gradient collectives, those over the whole job and, where the new layout puts
    neighbouring stages on other nodes, the pipeline sends (their messages by ``factor``).

    Returns:
        The fits and network assumptions as sentences, and bool[N]: the nodes whose scale was set.
    """
    g = a.graph
    groups = process_groups(a)
    devices = {d for info in g.trace.ranks for d in info.devices}
    links = (net, nvlink_of(devices))
    traced_nodes = -(-layout.world // GPUS_PER_NODE)
    roles = [  # (role, nodes, ring sizes, (traced, new) nodes of a group's ranks, the new size in words)
        ("gradient", members, (layout.current, layout.new),
         lambda r: (nodes_spanned(r) if r else min(layout.current, traced_nodes), layout.new_group_nodes(r)),
         str(layout.new)),
        ("world", _world_members(a, groups, members, layout.world), (layout.world, layout.new_world),
         lambda r: (nodes_spanned(range(layout.world)), nodes_spanned(range(layout.new_world))),
         f"{layout.new_world} ranks"),
    ]
    if layout.megatron:  # a send keeps its stages and indices: its ranks move with the layout
        roles.append(("p2p", _collective_nodes(a, ("sendrecv",)), (2, 2),
                      lambda r: (nodes_spanned(r), layout.new_link_nodes(r) if r else 1), f"{layout.new_world} ranks"))
    notes: list[str] = []
    modelled = np.zeros(len(g), dtype=bool)
    for role, nodes, sizes, span, at in roles:
        if not len(nodes):
            continue
        by_group, now, new = _spans(a, nodes, groups, span)
        # activations shrink with the per-rank batch, gradients do not
        fits = _scale_ring(a, nodes, sizes, (now, new), links, node_scale, " of the world group" * (role == "world"),
                           bytes_factor=factor if role == "p2p" else 1.0)
        if role != "p2p" or (now != new).any():  # a send that stays on its link needs no words
            notes += fits
        notes += _network_notes(role, at, by_group, links, devices)
        modelled[nodes] = True
    return notes, modelled
