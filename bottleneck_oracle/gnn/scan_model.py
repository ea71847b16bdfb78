"""The graph model over a scanned job, rank by rank: each step's predicted wall time and the critical path the
model's walk finds, as ``Predictor.predict`` gives them on the whole job, with no process holding two ranks.

The rounds run on the ranks' kept traces after the scan's own (``job/scan.py``'s ``then``):

1. each rank says where its steps start and how long they span, and where its receives resumed; the driver
   takes the job's frame of each step (its earliest start, its longest span) and every edge between two ranks
   (a collective's last arrival to each other member, a send to the node that waited for it), as the job's
   graph has them;
2. a round per layer: each rank embeds its nodes with its halo's embeddings of the layer before, and sends its
   boundary's; after the last layer, its pooled sums, which the driver adds into each step's context;
3. the heads: each rank's proposals of the step's end and the walk's scores of the edges into its nodes, kept
   on the driver's disk a rank at a time;
4. the walk, one step at a time, entering a rank's scores of the step as it goes (``gnn/walk.walk_parts``).

The driver holds the edges between ranks and the boundary's embeddings (a few hundred bytes per collective member
and layer), a chunk of ranks' scores on their way to its disk, and the walk with the last few ranks' scores it read.
"""

from __future__ import annotations

import math
import pickle
import shutil
import tempfile
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from bottleneck_oracle.gnn.data import NODE_TYPES
from bottleneck_oracle.gnn.rank_model import (
    Boundary,
    ModelRound,
    RankScores,
    RankSteps,
    StepLinks,
    load_model,
    model_round,
    rank_steps,
)
from bottleneck_oracle.gnn.walk import WalkPart, walk_parts
from bottleneck_oracle.graph.types import EdgeType
from bottleneck_oracle.job.scan import Scan
from bottleneck_oracle.job.scan_rounds import KeptJob

__all__ = ["StepModel", "ScanModel", "model_rounds", "model_to_dict", "scan_model"]

_COMM = NODE_TYPES.index("comm")
_READOUT_CHUNK = 16  # ranks whose heads are read at once: the driver holds their scores until they are on disk
_KEPT_PARTS = 8  # ranks' walk scores the walk keeps read


@dataclass(frozen=True, slots=True)
class StepModel:
    """What the model says of one step of the job.

    Args:
        step_ms (float): its predicted wall time (the slowest rank's).
        node (np.ndarray): int64[K] the nodes its walk back from the step's end visits (the job graph's ids, the
            ranks' nodes numbered one rank after another), in node order; ``rank``: each one's rank.
        share (np.ndarray): float32[K] each one's predicted share of the wall time; ``on_path``: its on-path
            score (0.5 and above on the walk, ordered within by the node head).
        name (tuple[str, ...]): each one's name.
    """

    step: int
    step_ms: float
    node: np.ndarray
    rank: np.ndarray
    share: np.ndarray
    on_path: np.ndarray
    name: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScanModel:
    """The model's answer for every complete step, with where its checkpoint came from."""

    checkpoint: str
    steps: tuple[StepModel, ...]


def model_rounds(checkpoint: Path | None = None, max_nodes: int | None = None):  # type: ignore[no-untyped-def]
    """The rounds ``scan(then=...)`` runs after its own: ``scan_model`` with ``checkpoint`` (the shipped one)."""
    from bottleneck_oracle.gnn.predict import SHIPPED_CHECKPOINT

    path = str(SHIPPED_CHECKPOINT if checkpoint is None else checkpoint)
    return lambda kept, found: scan_model(kept, found, path, max_nodes)


def scan_model(kept: KeptJob, found: Scan, checkpoint: str, max_nodes: int | None = None) -> ScanModel:
    """The graph model over the scanned job ``found`` whose ranks ``kept`` holds.

    Args:
        max_nodes: a step of more nodes keeps the ranks that end last, as many as fit, as ``step_graphs`` cuts it
            for ``Predictor.predict`` (None: every rank; no process holds more than one rank's nodes anyway).
    """
    model = load_model(checkpoint)
    ranks = [s.rank for s in kept.summaries]
    world = len(ranks)
    steps = tuple(sorted({r.step for r in found.steps if r.step >= 0} - {s for s, _ in found.partial_steps}))
    first = kept.map(rank_steps, [steps] * world, "model: steps")
    if max_nodes is not None:
        first = _bounded(first, ranks, kept.shift_ns, max_nodes)
    links = _links(kept, first, checkpoint)
    halo_h: list[list[list[np.ndarray]]] = [[[] for _ in lk] for lk in links]
    halo_x: list[list[np.ndarray | None]] = [[None] * len(lk) for lk in links]
    sums: dict[int, np.ndarray] = {}
    for layer in range(model.config.layers + 1):
        rounds = [ModelRound(checkpoint, world, tuple(lk), tuple(h), tuple(x), layer)
                  for lk, h, x in zip(links, halo_h, halo_x)]
        got = kept.map(model_round, rounds, f"model: layer {layer}" if layer else "model: features")
        boundary = {(rank, b.step): (lk.boundary, b) for rank, lks, bs in zip(ranks, links, got)
                    for lk, b in zip(lks, bs)}
        for i, lks in enumerate(links):
            for j, lk in enumerate(lks):
                h, x = _halo(boundary, lk, model.config.hidden)
                halo_h[i][j].append(h)
                if layer == 0:
                    halo_x[i][j] = x
        if layer == model.config.layers:
            for bs in got:
                for b in bs:
                    sums[b.step] = sums.get(b.step, 0) + b.sums
    # the ranks as forward reads them off the features (float32 log2)
    scale = float(torch.tensor(np.log2(world), dtype=torch.float32).exp2())
    context = {s: model.context_of(torch.from_numpy(v), scale).numpy() for s, v in sums.items()}
    spill = Path(tempfile.mkdtemp(prefix="oracle-model-"))
    index: dict[int, dict[int, _Heads]] = defaultdict(dict)  # step -> rank -> what its heads gave
    try:
        for lo in range(0, world, _READOUT_CHUNK):  # the heads, a chunk of ranks at a time, onto this disk
            part = slice(lo, lo + _READOUT_CHUNK)
            rounds = [ModelRound(checkpoint, world, tuple(lk), tuple(h), tuple(x), model.config.layers,
                                 tuple(context[l.step] for l in lk))
                      for lk, h, x in zip(links[part], halo_h[part], halo_x[part])]
            heads = kept.map(model_round, rounds, "model: heads", part=part, last=True)
            for rank, scores in zip(ranks[part], heads):
                for s in scores:
                    (spill / f"{rank}-{s.step}.pkl").write_bytes(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL))
                    best = int(np.argmax(s.terminal))
                    index[s.step][rank] = _Heads(float(s.terminal[best]), int(s.node[best]), len(s.edge), s.log_end)
        base = dict(zip(ranks, kept.base))
        out = []
        for step in sorted(index):  # a step too large for any rank alone has none
            mine = [r for r in ranks if r in index[step]]
            out.append(_walked(spill, step, mine, base, [index[step][r] for r in mine]))
        return ScanModel(checkpoint, tuple(out))
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _bounded(first: list[RankSteps], ranks: list[int], shift: np.ndarray, max_nodes: int) -> list[RankSteps]:
    """Each rank's steps less those a step of more than ``max_nodes`` nodes leaves out: it keeps the ranks that end
    last, the last first, as many as fit (none when the last alone does not)."""
    size: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # step -> (last end, rank, nodes)
    for rank, f in zip(ranks, first):
        for step, end, count in zip(f.step.tolist(), f.last_end.tolist(), f.count.tolist()):
            size[step].append((end + int(shift[rank]), rank, count))
    out: dict[int, set[int]] = {}
    for step, rows in size.items():
        total, out[step] = 0, set()
        if sum(c for _, _, c in rows) <= max_nodes:
            out[step] = {r for _, r, _ in rows}
            continue
        for _, rank, count in sorted(rows, key=lambda x: (-x[0], x[1])):
            total += count
            if total > max_nodes:
                break
            out[step].add(rank)
    cut = []
    for rank, f in zip(ranks, first):
        keep = np.array([rank in out[s] for s in f.step.tolist()], dtype=bool)
        cut.append(replace(f, step=f.step[keep], known=f.known[keep], cpu_start=f.cpu_start[keep],
                           first_start=f.first_start[keep], last_end=f.last_end[keep], count=f.count[keep],
                           span_us=f.span_us[keep], relations=tuple(r for r, k in zip(f.relations, keep) if k)))
    return cut


def _halo(boundary: dict[tuple[int, int], tuple[np.ndarray, Boundary]], lk: StepLinks, width: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """The embeddings (``width`` wide) and the gstart and duration of ``lk``'s halo, from its ranks' boundaries."""
    h = np.zeros((len(lk.halo_node), width), dtype=np.float32)
    x = np.zeros((len(lk.halo_node), 2), dtype=np.float32)
    for r in np.unique(lk.halo_rank).tolist():
        nodes, b = boundary[(r, lk.step)]
        mine = np.flatnonzero(lk.halo_rank == r)
        at = np.searchsorted(nodes, lk.halo_node[mine])
        h[mine], x[mine] = b.h[at], b.x[at]
    return h, x


def _links(kept: KeptJob, first: list[RankSteps], checkpoint: str) -> list[list[StepLinks]]:
    """Per rank, per step it has nodes in: the step's frame and the rank's edges to other ranks."""
    shift = kept.shift_ns
    ranks = [s.rank for s in kept.summaries]
    origin: dict[int, int] = {}
    known: dict[int, int] = {}
    longest: dict[int, float] = defaultdict(float)
    for rank, f in zip(ranks, first):
        for step, has, start, lo, span in zip(f.step.tolist(), f.known.tolist(), f.cpu_start.tolist(),
                                              f.first_start.tolist(), f.span_us.tolist()):
            # as the job's graph reads the origin: the earliest start a rank's step table gives, else the earliest node
            if has and start + shift[rank] > 0:
                known[step] = min(known.get(step, start + shift[rank]), start + shift[rank])
            origin[step] = min(origin.get(step, lo + shift[rank]), lo + shift[rank])
            longest[step] = max(longest[step], span)
    origin.update(known)
    edges = _cross_edges(kept, first)
    relations: dict[int, set[tuple[str, str, str]]] = defaultdict(set)
    for f in first:
        for step, keys in zip(f.step.tolist(), f.relations):
            relations[step] |= keys
    for _, _, _, _, et, step, st, dt in edges:
        rel = EdgeType(et).name.lower()
        relations[step] |= {(NODE_TYPES[st], rel, NODE_TYPES[dt]), (NODE_TYPES[dt], f"rev_{rel}", NODE_TYPES[st])}
    known = set(load_model(checkpoint).config.relations)
    by_rank_step: dict[tuple[int, int], list[tuple[int, bool, int, int, int, int]]] = defaultdict(list)
    for (sr, sn, dr, dn, et, step, st, dt) in edges:
        by_rank_step[(dr, step)].append((dn, False, et, sr, sn, st))
        by_rank_step[(sr, step)].append((sn, True, et, dr, dn, dt))
    out = []
    for rank, f in zip(ranks, first):
        mine = []
        for step in f.step.tolist():
            rows = by_rank_step.get((rank, step), [])
            lk = StepLinks(step, int(origin[step] - shift[rank]), float(longest[step]),
                           tuple(sorted(relations[step] & known)))
            if rows:
                far = sorted({(r, n, t) for _, _, _, r, n, t in rows})
                index = {(r, n): i for i, (r, n, _) in enumerate(far)}
                lk = StepLinks(
                    step, lk.origin_ns, lk.longest_us, lk.relations, node=np.array([x[0] for x in rows], np.int64),
                    out=np.array([x[1] for x in rows], dtype=bool), etype=np.array([x[2] for x in rows], np.int8),
                    far=np.array([index[(x[3], x[4])] for x in rows], dtype=np.int64),
                    halo_rank=np.array([r for r, _, _ in far], dtype=np.int64),
                    halo_node=np.array([n for _, n, _ in far], dtype=np.int64),
                    halo_type=np.array([t for _, _, t in far], dtype=np.int8))
            mine.append(lk)
        out.append(mine)
    return out


def _cross_edges(kept: KeptJob, first: list[RankSteps]) -> list[tuple[int, int, int, int, int, int, int, int]]:
    """Every edge of the job's graph between two ranks, in one step: (source rank, node, target rank, node, type,
    step, source type, target type). A collective's last member to arrive → each other member; a send → the node
    on the receiving thread that resumed after it, unless an edge runs the other way (as ``build_graph`` drops it)."""
    summary = {s.rank: s for s in kept.summaries}
    present = {(s.rank, step) for s, f in zip(kept.summaries, first) for step in f.step.tolist()}

    def step_of(rank: int, node: int) -> int:
        """The member's step, where the model sees it (-1: elsewhere)."""
        s = summary[rank]
        at = int(np.searchsorted(s.member, node))
        step = int(s.member_step[at]) if at < len(s.member) and s.member[at] == node else -1
        return step if (rank, step) in present else -1

    out = []
    for s, job in zip(kept.summaries, kept.jobs):
        reliable = job.table.reliable[job.rows(job.instance)] if len(job.instance) else np.zeros(0, bool)
        for node, ok, lr, ln in zip(job.nodes.tolist(), reliable.tolist(), job.last_rank.tolist(),
                                    job.last_node.tolist()):
            if not ok or (lr, ln) == (s.rank, node):
                continue
            step = step_of(s.rank, node)
            if step >= 0 and step == step_of(lr, ln):
                out.append((lr, ln, s.rank, node, int(EdgeType.COLLECTIVE), step, _COMM, _COMM))
    ordering = {(a, b, c, d) for a, b, c, d, *_ in out}
    sends = []
    for s, job, f in zip(kept.summaries, kept.jobs, first):
        for r, n, w, ws, wt in zip(job.sends.rank.tolist(), job.sends.node.tolist(), f.resumer.tolist(),
                                   f.resumer_step.tolist(), f.resumer_type.tolist()):
            if w >= 0 and ws >= 0 and ws == step_of(r, n) and (s.rank, ws) in present:
                sends.append((r, n, s.rank, w, int(EdgeType.SYNC), ws, _COMM, wt))
    ordering |= {(a, b, c, d) for a, b, c, d, *_ in sends}
    return out + [e for e in sends if (e[2], e[3], e[0], e[1]) not in ordering]


class _StepParts:
    """One step's walk scores, a rank at a time from the driver's disk, the last ``_KEPT_PARTS`` read kept."""

    def __init__(self, spill: Path, step: int, ranks: list[int]) -> None:
        self.files = [spill / f"{rank}-{step}.pkl" for rank in ranks]
        self.kept: OrderedDict[int, tuple[RankScores, WalkPart]] = OrderedDict()
        self.ranks = np.array(ranks, dtype=np.int64)  # in order: a rank's part is its index

    def scores(self, k: int) -> RankScores:
        return self._get(k)[0]

    def walk_part(self, k: int) -> WalkPart:
        return self._get(k)[1]

    def _get(self, k: int) -> tuple[RankScores, WalkPart]:
        if k not in self.kept:
            s: RankScores = pickle.loads(self.files[k].read_bytes())
            src_part = np.searchsorted(self.ranks, s.edge_rank)
            self.kept[k] = (s, WalkPart.of(s.node, s.stop, s.edge_dst, src_part, s.edge_src, s.edge))
            while len(self.kept) > _KEPT_PARTS:
                self.kept.popitem(last=False)
        self.kept.move_to_end(k)
        return self.kept[k]


class _Heads(NamedTuple):
    """What the driver keeps of a rank's scores of a step: its best terminal logit and that node, its edges' count,
    and its latest proposal of the step's end."""

    terminal: float
    node: int
    edges: int
    log_end: float


def _walked(spill: Path, step: int, ranks: list[int], base: dict[int, int], heads: list[_Heads]) -> StepModel:
    """The walk over every rank's scores of ``step`` (``heads``: of each of ``ranks``), entering a rank's as it goes,
    and the step's predicted wall time."""
    start = max(range(len(heads)), key=lambda k: (heads[k].terminal, -k))  # the first of the best, as argmax takes
    parts = _StepParts(spill, step, ranks)
    visited = walk_parts((start, heads[start].node), parts.walk_part, sum(h.edges for h in heads))
    node, rank_of, share, on_path, names = [], [], [], [], []
    for k in sorted(visited):
        p = parts.scores(k)
        at = np.searchsorted(p.node, visited[k])
        node.append(p.node[at] + base[ranks[k]])
        rank_of.append(np.full(len(at), ranks[k], dtype=np.int64))
        share.append(p.share[at])
        on_path.append((0.5 + 0.5 * p.on_path[at]).astype(np.float32))
        names += [p.names[i] for i in p.name[at].tolist()]
    return StepModel(step, math.exp(max(h.log_end for h in heads)), np.concatenate(node), np.concatenate(rank_of),
                     np.concatenate(share), np.concatenate(on_path), tuple(names))


def model_to_dict(m: ScanModel, found: Scan, top: int = 5) -> dict[str, object]:
    """``m`` as JSON-ready data: per step, the recorded wall time (its slowest rank's), the model's, and the ``top``
    nodes of its walk by predicted share."""
    recorded: dict[int, int] = {}
    for r in found.steps:
        if (r.step, r.rank) not in found.partial_steps:
            recorded[r.step] = max(recorded.get(r.step, 0), r.wall_ns)
    out = []
    for s in m.steps:
        order = np.argsort(-s.share, kind="stable")[:top].tolist()
        out.append({"step": s.step, "recorded_ms": round(recorded[s.step] / 1e6, 3), "model_ms": round(s.step_ms, 3),
                    "walk_nodes": len(s.node), "walk_ranks": sorted(set(s.rank.tolist())),
                    "top": [{"rank": int(s.rank[i]), "name": s.name[i], "share": round(float(s.share[i]), 4)}
                            for i in order]})
    return {"checkpoint": m.checkpoint, "steps": out}
