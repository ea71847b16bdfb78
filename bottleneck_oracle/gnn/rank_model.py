"""The graph model on one rank of a job: the rank's part of each step's graph, with the nodes of other ranks it has
edges to (its halo), run a round at a time (``gnn/scan_model.py`` joins the rounds).

The model passes messages along every edge of a step, those between ranks too. A rank's task builds its nodes'
features as the job's step graph has them (the job's ranks, the step's earliest start and longest span come from
the driver) and adds its halo: the nodes at the other end of its edges to other ranks, whose embeddings after
each layer the driver brings from their ranks. So a round computes one more layer; the last reads the heads with
the step's context (pooled over every rank), and the walk's scores of the edges into the rank's nodes.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from bottleneck_oracle.gnn.data import COLUMN, FEATURES, NODE_TYPES, GraphColumns, step_features, typed_edges
from bottleneck_oracle.gnn.model import HeteroGAT
from bottleneck_oracle.graph.build import resumes
from bottleneck_oracle.graph.graph import ExecGraph
from bottleneck_oracle.graph.job_collectives import JobCollectives
from bottleneck_oracle.graph.types import Role

__all__ = ["RankSteps", "StepLinks", "ModelRound", "Boundary", "RankScores", "load_model", "rank_steps", "model_round"]

_NO = np.zeros(0, dtype=np.int64)
GSTART_DUR = [COLUMN["gstart_ms"], COLUMN["dur_ms"]]  # what an edge's score reads of its far end


@dataclass(frozen=True, slots=True)
class RankSteps:
    """Round 1 of one rank: what its steps' features need from the other ranks, and where its receives resumed.

    Args:
        step (np.ndarray): int64[S] the steps asked for where the rank has nodes.
        known (np.ndarray): bool[S] the rank's step table has the step; ``cpu_start``: int64[S] where it starts.
        first_start, last_end (np.ndarray): int64[S] the earliest start and the latest end of its nodes in the
            step; ``count``: int64[S] how many there are.
        span_us (np.ndarray): float64[S] how long its step spans (its nodes' latest end after the step's start).
        relations (tuple[frozenset, ...]): per step, the relations of the edges inside the rank (a relation's
            bias reaches every node of its target type once any rank of the step has one).
        resumer (np.ndarray): int64 per send of ``job.sends``: the node whose thread resumed after it (-1: none,
            or a node the model does not see); ``resumer_step``: its step; ``resumer_type``: its NODE_TYPES index.
    """

    step: np.ndarray
    known: np.ndarray
    cpu_start: np.ndarray
    first_start: np.ndarray
    last_end: np.ndarray
    count: np.ndarray
    span_us: np.ndarray
    relations: tuple[frozenset[tuple[str, str, str]], ...]
    resumer: np.ndarray
    resumer_step: np.ndarray
    resumer_type: np.ndarray


@dataclass(frozen=True, slots=True)
class StepLinks:
    """One rank's part of one step: the job's frame and its edges to other ranks' nodes.

    Args:
        origin_ns (int): the step's earliest rank's start, on this rank's clock.
        longest_us (float): the longest rank's span of the step.
        relations (tuple): the relations of the step's edges on every rank, and between ranks.
        node (np.ndarray): int64[K] the rank's end of each edge; ``out``: bool[K] it is the source.
        etype (np.ndarray): int8[K] each edge's EdgeType.
        far (np.ndarray): int64[K] the other end, a row of the halo.
        halo_rank, halo_node (np.ndarray): int64[H] the halo's nodes, each on its rank; ``halo_type``: int8[H].
    """

    step: int
    origin_ns: int
    longest_us: float
    relations: tuple[tuple[str, str, str], ...] = ()
    node: np.ndarray = field(default_factory=lambda: _NO)
    out: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    etype: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    far: np.ndarray = field(default_factory=lambda: _NO)
    halo_rank: np.ndarray = field(default_factory=lambda: _NO)
    halo_node: np.ndarray = field(default_factory=lambda: _NO)
    halo_type: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))

    @property
    def boundary(self) -> np.ndarray:
        """int64: the rank's nodes with an edge to another rank, in order."""
        return np.unique(self.node)


@dataclass(frozen=True, slots=True)
class ModelRound:
    """One round's input for one rank.

    Args:
        checkpoint (str): the model's folder.
        world (int): the job's ranks.
        links (tuple[StepLinks, ...]): the rank's steps.
        halo_h (tuple[list[np.ndarray], ...]): per step, its halo's embeddings after each layer so far (float32[H,
            hidden] each); ``halo_x``: per step, their gstart and duration features (float32[H, 2]; None before
            they are known).
        layers (int): the layers this round computes; ``context``: per step, the step's context (None: the round
            embeds, it does not read the heads).
    """

    checkpoint: str
    world: int
    links: tuple[StepLinks, ...]
    halo_h: tuple[list[np.ndarray], ...]
    halo_x: tuple[np.ndarray | None, ...]
    layers: int
    context: tuple[np.ndarray, ...] | None = None


@dataclass(frozen=True, slots=True)
class Boundary:
    """An embedding round's answer for one step: its boundary's embeddings (``StepLinks.boundary`` order), their
    gstart and duration, and, after the last layer, the rank's ``pooled_sums``."""

    step: int
    h: np.ndarray
    x: np.ndarray
    sums: np.ndarray | None


@dataclass(frozen=True, slots=True)
class RankScores:
    """The last round's answer for one step: the rank's nodes and what the model says of each, and the walk's
    scores of the edges into them.

    Args:
        node (np.ndarray): int64[n] the rank's nodes in the step, in order.
        on_path, share, terminal, stop (np.ndarray): float32[n] the node head's on-path probability, share of the
            wall time, and the walk's logits.
        log_end (float): the latest of the rank's "my end plus what follows" proposals (log ms).
        edge_rank, edge_src, edge_dst (np.ndarray): int64[E] each edge into the rank's nodes: its source's rank and
            node, its target; ``edge``: float32[E] its binding logit.
        name (np.ndarray): int32[n] each node's name in ``names``.
    """

    step: int
    node: np.ndarray
    on_path: np.ndarray
    share: np.ndarray
    terminal: np.ndarray
    stop: np.ndarray
    log_end: float
    edge_rank: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge: np.ndarray
    name: np.ndarray
    names: tuple[str, ...]


@lru_cache(maxsize=2)
def load_model(checkpoint: str) -> HeteroGAT:
    """The model of the checkpoint folder, loaded once per process."""
    from bottleneck_oracle.gnn.train import load_checkpoint

    return load_checkpoint(Path(checkpoint)).model.eval()


def _kept(g: ExecGraph, columns: GraphColumns) -> np.ndarray:
    return (columns.ntype >= 0) & (g.role != Role.STEP)


def rank_steps(graph: Callable[[], ExecGraph], job: JobCollectives, steps: tuple[int, ...], state: Path) -> RankSteps:
    """Round 1 of one rank, for the job's complete ``steps`` (``graph_task``'s arguments)."""
    g = graph()
    columns = GraphColumns.of(g)
    kept, step_of = _kept(g, columns), g.step
    rank = int(g.trace.ranks[0].rank)
    rows: list[tuple[int, bool, int, int, float, int, int]] = []
    relations = []
    for step in steps:
        nodes = np.flatnonzero(kept & (step_of == step))
        if not len(nodes):
            continue
        relations.append(frozenset(typed_edges(*_inside(g, nodes), columns.ntype[nodes], True)))
        known = (rank, step) in columns.start_of
        step_start = columns.step_start(g, nodes, step)
        end_us = np.maximum(g.start_ns[nodes] - step_start, 0) / 1e3 + g.dur_ns[nodes] / 1e3  # as time_columns
        rows.append((step, known, columns.start_of.get((rank, step), 0), int(g.start_ns[nodes].min()),
                     float(end_us.max()), int((g.start_ns[nodes] + g.dur_ns[nodes]).max()), len(nodes)))
    sent = job.sends
    waiter = resumes(g.lane, g.start_ns, g.lane[sent.receive], sent.end_ns)
    seen = waiter >= 0
    waiter[seen] = np.where(kept[waiter[seen]], waiter[seen], -1)
    seen = waiter >= 0
    return RankSteps(
        step=np.array([r[0] for r in rows], dtype=np.int64), known=np.array([r[1] for r in rows], dtype=bool),
        cpu_start=np.array([r[2] for r in rows], dtype=np.int64), first_start=np.array([r[3] for r in rows], np.int64),
        last_end=np.array([r[5] for r in rows], dtype=np.int64), count=np.array([r[6] for r in rows], np.int64),
        span_us=np.array([r[4] for r in rows], dtype=np.float64), relations=tuple(relations), resumer=waiter,
        resumer_step=np.where(seen, step_of[np.maximum(waiter, 0)], -1).astype(np.int64),
        resumer_type=np.where(seen, columns.ntype[np.maximum(waiter, 0)], -1).astype(np.int8),
    )


@dataclass(frozen=True, slots=True)
class _StepInputs:
    """One step of one rank as the model takes it: node types' rows, local rows first, then the halo's."""

    rank: int
    nodes: np.ndarray
    name: np.ndarray  # each node's name in ``names``
    names: tuple[str, ...]
    x: dict[str, torch.Tensor]
    edges: dict[tuple[str, str, str], torch.Tensor]
    local: dict[str, torch.Tensor]  # per type: the rows of the rank's own nodes
    halo: dict[str, tuple[torch.Tensor, np.ndarray]]  # per type: the halo's rows, and which halo node each is
    where: tuple[np.ndarray, np.ndarray]  # per position (nodes, then halo): its type and its row in that type


def _inside(g: ExecGraph, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges between ``nodes`` as positions in it: (src, dst, type)."""
    local = np.full(len(g), -1, dtype=np.int64)
    local[nodes] = np.arange(len(nodes))
    src, dst = local[g.edge_src], local[g.edge_dst]
    inside = (src >= 0) & (dst >= 0)
    return src[inside], dst[inside], g.edge_type[inside]


def _inputs(g: ExecGraph, columns: GraphColumns, kept: np.ndarray, links: StepLinks, world: int,
            bidirectional: bool) -> _StepInputs:
    nodes = np.flatnonzero(kept & (g.step == links.step))
    n, m = len(nodes), len(links.halo_node)
    src, dst, etype = _inside(g, nodes)
    near, far = np.searchsorted(nodes, links.node), n + links.far
    src = np.concatenate([src, np.where(links.out, near, far)])
    dst = np.concatenate([dst, np.where(links.out, far, near)])
    etype = np.concatenate([etype, links.etype])
    x = np.zeros((n + m, len(FEATURES)), dtype=np.float32)
    x[:n] = step_features(g, columns, nodes, (src, dst, etype), columns.step_start(g, nodes, links.step), world,
                          links.origin_ns, links.longest_us)
    x[n:, COLUMN["log2_world"]] = np.log2(max(world, 1))
    t = np.concatenate([columns.ntype[nodes], links.halo_type]).astype(np.int64)
    row = np.zeros(n + m, dtype=np.int64)
    xs, own, halo = {}, {}, {}
    for k, name in enumerate(NODE_TYPES):
        idx = np.flatnonzero(t == k)
        row[idx] = np.arange(len(idx))
        xs[name] = torch.from_numpy(x[idx])
        own[name] = torch.from_numpy(np.flatnonzero(idx < n))
        far_rows = np.flatnonzero(idx >= n)
        halo[name] = (torch.from_numpy(far_rows), idx[far_rows] - n)
    edges = {key: torch.from_numpy(row[pair]) for key, pair in typed_edges(src, dst, etype, t, bidirectional).items()}
    for key in links.relations:  # the step's relations that have no edge here still add their bias
        edges.setdefault(key, torch.zeros((2, 0), dtype=torch.int64))
    names, name = np.unique(g.name[nodes], return_inverse=True)
    return _StepInputs(int(g.trace.ranks[0].rank), nodes, name.astype(np.int32),
                       tuple(g.trace.strings[int(i)] for i in names), xs, edges, own, halo, (t, row))


def _pinned(inputs: _StepInputs, halo_h: list[np.ndarray]) -> list[dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    return [{t: (rows, torch.from_numpy(h[which])) for t, (rows, which) in inputs.halo.items()} for h in halo_h]


def _gather(h: dict[str, torch.Tensor], where: tuple[np.ndarray, np.ndarray], positions: np.ndarray,
            width: int) -> np.ndarray:
    t, row = where
    out = np.zeros((len(positions), width), dtype=np.float32)
    for k, name in enumerate(NODE_TYPES):
        pick = np.flatnonzero(t[positions] == k)
        if len(pick):
            out[pick] = h[name][torch.from_numpy(row[positions[pick]])].numpy()
    return out


def model_round(graph: Callable[[], ExecGraph], job: JobCollectives, arg: ModelRound,
                state: Path) -> list[Boundary] | list[RankScores]:
    """One round on one rank (``graph_task``'s arguments): its boundary's embeddings after ``arg.layers`` layers
    (and, after the last, its pooled sums), or, given the context, what the heads say of its nodes. Each round
    leaves the rank's step graphs and embeddings in ``state`` for the next, which goes on from there; without them
    (the round ran on another node) it builds them again."""
    # one thread: the executor runs a task per core, and a forked process must not use its parent's OpenMP pool
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            return _round(graph, arg, state)
    finally:
        torch.set_num_threads(threads)


def _round(graph: Callable[[], ExecGraph], arg: ModelRound, state: Path) -> list[Boundary] | list[RankScores]:
    if not arg.links:  # none of the steps the model sees has a node here
        return []
    model = load_model(arg.checkpoint)
    readout = arg.context is not None
    done = arg.layers if readout else arg.layers - 1  # the layers the state must hold to go on from
    kept_state = _load(state, done)
    if kept_state is None:
        g = graph()
        columns = GraphColumns.of(g)
        kept = _kept(g, columns)
        steps = [(_inputs(g, columns, kept, links, arg.world, model.config.bidirectional), None)
                 for links in arg.links]
    else:
        steps = kept_state
    out: list = []  # type: ignore[type-arg]
    keep = []
    for i, (links, (inputs, h)) in enumerate(zip(arg.links, steps)):
        edges = {**model.known_relations(inputs.edges),
                 **{k: v for k, v in inputs.edges.items() if k in links.relations and not v.numel()}}
        h = model.embed(inputs.x, edges, _pinned(inputs, arg.halo_h[i]), arg.layers,
                        None if h is None else (done, h))
        if readout:
            _set_halo_x(inputs, arg.halo_x[i])
            out.append(_scores(model, inputs, edges, h, torch.from_numpy(arg.context[i]), links))  # type: ignore[index]
        else:
            out.append(_boundary(model, inputs, links, h, arg.layers == model.config.layers))
            keep.append((inputs, h))
    if not readout:
        _save(state, arg.layers, keep)
    return out


def _load(state: Path, layers: int) -> list[tuple[_StepInputs, dict[str, torch.Tensor] | None]] | None:
    """The step graphs and embeddings after ``layers`` layers a round before left, if it was that round's."""
    if layers < 0:
        return None
    try:
        kept_layers, steps = pickle.loads(state.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError):
        return None
    return steps if kept_layers == layers else None


def _save(state: Path, layers: int, steps: list[tuple[_StepInputs, dict[str, torch.Tensor]]]) -> None:
    part = state.with_suffix(".part")
    try:
        part.write_bytes(pickle.dumps((layers, steps), protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(part, state)  # whole or absent
    except OSError:  # a full temporary folder: the next round builds them again
        part.unlink(missing_ok=True)


def _set_halo_x(inputs: _StepInputs, halo_x: np.ndarray | None) -> None:
    """Gives the halo's rows their gstart and duration (what an edge's score reads of its far end)."""
    if halo_x is None:
        return
    for t, (rows, which) in inputs.halo.items():
        if len(rows):
            inputs.x[t][rows[:, None], torch.tensor(GSTART_DUR)] = torch.from_numpy(halo_x[which])


def _boundary(model: HeteroGAT, inputs: _StepInputs, links: StepLinks, h: dict[str, torch.Tensor],
              last: bool) -> Boundary:
    positions = np.searchsorted(inputs.nodes, links.boundary)
    sums = model.pooled_sums({t: v[inputs.local[t]] for t, v in h.items()}) if last else None
    return Boundary(links.step, _gather(h, inputs.where, positions, model.config.hidden),
                    _gather({t: v[:, GSTART_DUR] for t, v in inputs.x.items()}, inputs.where, positions, 2),
                    None if sums is None else sums.numpy())


def _scores(model: HeteroGAT, inputs: _StepInputs, edges: dict[tuple[str, str, str], torch.Tensor],
            h: dict[str, torch.Tensor], context: torch.Tensor, links: StepLinks) -> RankScores:
    t, _ = inputs.where
    n = len(inputs.nodes)
    # the positions each type's rows stand for, to read the edges back as nodes
    position = {name: np.flatnonzero(t == k) for k, name in enumerate(NODE_TYPES)}
    into = {}
    for key, ei in edges.items():
        mine = position[key[2]][ei[1].numpy()] < n
        into[key] = ei[:, torch.from_numpy(mine)]
    out = model.readout(inputs.x, h, {k: v for k, v in into.items() if v.shape[1]}, context, inputs.local)
    fields = {f: np.zeros(n, dtype=np.float32) for f in ("on_path", "share", "terminal", "stop")}
    for name, logits in out.on_path_logit.items():
        at = position[name][inputs.local[name].numpy()]
        fields["on_path"][at] = torch.sigmoid(logits).numpy()
        fields["share"][at] = out.share[name].numpy()
        fields["terminal"][at] = out.terminal_logit[name].numpy()
        fields["stop"][at] = out.stop_logit[name].numpy()
    rank_of = np.concatenate([np.full(n, inputs.rank), links.halo_rank])
    node_of = np.concatenate([inputs.nodes, links.halo_node])
    e_rank, e_src, e_dst, e_logit = [], [], [], []
    for key, logits in out.edge_logit.items():
        ei = into[key].numpy()
        s = position[key[0]][ei[0]]
        e_rank.append(rank_of[s])
        e_src.append(node_of[s])
        e_dst.append(inputs.nodes[position[key[2]][ei[1]]])
        e_logit.append(logits.numpy())
    cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)  # noqa: E731
    return RankScores(links.step, inputs.nodes, **fields, log_end=float(out.log_step_ms),
                      edge_rank=cat(e_rank, np.int64), edge_src=cat(e_src, np.int64), edge_dst=cat(e_dst, np.int64),
                      edge=cat(e_logit, np.float32), name=inputs.name, names=inputs.names)
