"""HeteroGAT: a GATConv per relation, residuals and layer norm, a node head and a step-time head.

The step-time head reads the step's end off the graph: every node proposes
"the step ends at my end plus what still follows me" in log space, and the
observed step is the largest proposal. An edit then gives time back: each
edited node returns to its rank a learned share (0 to 1.5) of the time the edit
saved it, near 1 on the critical path, near 0 with slack, above 1 where
shortening it also ends interference with overlapping work; the step ends with
its latest rank after what each rank got back. A second head learns what replaying
the edited DAG misses, interference: for every kernel, ``kappa`` (0 to 1), the time
it loses per unit of time it runs alongside a transfer on its GPU. With the levers
``replay/interference.py`` measures on the replay, the corrected replay is
``replay + sum(kappa * lever)`` (``interference_ms``).
Relations are fixed at construction (the corpus's metadata); an unseen relation
at inference is ignored.

Criticality is also read as a walk: every node scores how likely it is to be where
the step ends (terminal) or where its critical path starts (stop), and every edge
u → v how likely u is what released v, from both embeddings, the relation and the
edge's raw time gaps (v's start and end against u's end and start). Walking back
from the terminal along the best-scored edges (``gnn/walk.py``) follows the binding
dependencies across lanes and ranks as far as the path goes, which a few rounds
of message passing cannot see.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch_geometric.nn import GATConv, HeteroConv

from bottleneck_oracle.gnn.data import FEATURES, NODE_TYPES

__all__ = ["ModelConfig", "HeteroGAT", "Output", "interference_ms"]

_LOG_END = FEATURES.index("log_end_us")
_LOG_SAVED = FEATURES.index("log_saved_us")
_LOG_SPAN = FEATURES.index("log_rank_span_us")
_RANK_FRAC = FEATURES.index("rank_frac")
_GSTART = FEATURES.index("gstart_ms")
_DUR = FEATURES.index("dur_ms")
_US_PER_UNIT = 1e5  # linear time features are in units of 100 ms
_REL_DIM = 8
_LOG2_WORLD = FEATURES.index("log2_world")
_LOG_US_PER_MS = math.log(1e3)
_MAX_GAIN = 1.5  # a node's speed-up can give back more than its own saved time (interference)
_INTERFERED = "kernel"  # the node type whose time interference stretches


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Everything needed to rebuild the model (saved as JSON with the weights)."""

    relations: tuple[tuple[str, str, str], ...]
    in_dim: int = len(FEATURES)
    hidden: int = 64
    layers: int = 3
    heads: int = 2
    dropout: float = 0.1
    bidirectional: bool = True

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> ModelConfig:
        raw = dict(raw)
        raw["relations"] = tuple(tuple(r) for r in raw["relations"])  # type: ignore[union-attr]
        return cls(**raw)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Output:
    """Per node type: on-path logit and share of the wall time; the step's log wall time in ms; the
    walk's scores (terminal and stop per node type, binding per relation's edge)."""

    on_path_logit: dict[str, Tensor]
    share: dict[str, Tensor]
    log_step_ms: Tensor  # [1]
    kappa: dict[str, Tensor]  # per node of the interfered type: time lost per unit of overlap (0 to 1)
    terminal_logit: dict[str, Tensor]
    stop_logit: dict[str, Tensor]
    edge_logit: dict[tuple[str, str, str], Tensor]


def _pin(h: dict[str, Tensor], pinned: Sequence[dict[str, tuple[Tensor, Tensor]]], k: int) -> dict[str, Tensor]:
    if k >= len(pinned):
        return h
    out = dict(h)
    for t, (rows, values) in pinned[k].items():
        if t in out and len(rows):
            out[t] = out[t].index_put((rows,), values)
    return out


def edge_times(x_src: Tensor, x_dst: Tensor, edge_index: Tensor) -> Tensor:
    """[E, 3] signed log µs: v's start - u's end, v's end - u's end, v's start - u's start, for u → v."""
    def ends(x: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
        start = x[i, _GSTART].double() * _US_PER_UNIT
        return start, start + x[i, _DUR].double() * _US_PER_UNIT

    s_start, s_end = ends(x_src, edge_index[0])
    d_start, d_end = ends(x_dst, edge_index[1])
    gap = torch.stack([d_start - s_end, d_end - s_end, d_start - s_start], dim=1)
    return (torch.sign(gap) * torch.log1p(gap.abs())).float()


class HeteroGAT(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.encode = nn.ModuleDict({t: nn.Linear(config.in_dim, h) for t in NODE_TYPES})
        self.convs = nn.ModuleList(
            HeteroConv({rel: GATConv((h, h), h // config.heads, heads=config.heads, add_self_loops=False)
                        for rel in config.relations}, aggr="sum")
            for _ in range(config.layers)
        )
        self.norms = nn.ModuleList(nn.ModuleDict({t: nn.LayerNorm(h) for t in NODE_TYPES})
                                   for _ in range(config.layers))
        self.pool = nn.Linear(h, h)
        context = 2 * h * len(NODE_TYPES)
        self.node_head = nn.Sequential(nn.Linear(h + context, h), nn.ReLU(), nn.Linear(h, 4))
        self.relation_embedding = nn.Embedding(len(config.relations), _REL_DIM)
        self.edge_head = nn.Sequential(nn.Linear(2 * h + _REL_DIM + 3, h), nn.ReLU(), nn.Linear(h, h // 2),
                                       nn.ReLU(), nn.Linear(h // 2, 1))
        self.time_head = nn.Sequential(nn.Linear(h + context, h), nn.ReLU(), nn.Linear(h, 1))
        self.gain_head = nn.Sequential(nn.Linear(h + context, h), nn.ReLU(), nn.Linear(h, 1))
        self.interference_head = nn.Sequential(nn.Linear(h + context, h), nn.ReLU(), nn.Linear(h, 1))
        self.drop = nn.Dropout(config.dropout)

    @staticmethod
    def _log_gain_factor(x: dict[str, Tensor], gains: list[tuple[str, Tensor]]) -> Tensor:
        """log(max over ranks of (span - time given back) / max over ranks of span): 0 without an edit."""
        if not gains:
            return torch.zeros(())
        first = x[next(iter(x))]
        world = int(round(float(first[0, _LOG2_WORLD].exp2())))
        rank = {t: torch.round(v[:, _RANK_FRAC] * max(world - 1, 1)).long().clamp(0, world - 1)
                for t, v in x.items()}
        span = torch.zeros(world)
        for t, v in x.items():
            span = span.scatter_reduce(0, rank[t], torch.expm1(v[:, _LOG_SPAN]) / 1e3, reduce="amax")
        given = torch.zeros(world)
        for t, gain in gains:
            given = given.index_add(0, rank[t], gain)
        after = torch.clamp(span - given, min=0.05 * span).max()
        return torch.log(after / span.max().clamp(min=1e-6))

    def forward(self, x: dict[str, Tensor], edge_index: dict[tuple[str, str, str], Tensor]) -> Output:
        edges = self.known_relations(edge_index)
        h = self.embed(x, edges)
        world = x[next(iter(x))][0, _LOG2_WORLD].exp2() if x else torch.tensor(1.0)
        pooled = []
        for t in NODE_TYPES:
            v = h.get(t)
            if v is None or not len(v):
                pooled += [torch.zeros(self.config.hidden), torch.zeros(self.config.hidden)]
            else:  # mean: what the step is like; per-rank sum: how much of it there is
                pooled += [v.mean(0), self.pool(v).sum(0) / world / 1e3]
        return self.readout(x, h, edges, torch.cat(pooled))

    def known_relations(self, edge_index: dict[tuple[str, str, str], Tensor]) -> dict[tuple[str, str, str], Tensor]:
        """The edges of the relations the model was built with (an unseen one is ignored), none empty."""
        relations = set(self.config.relations)
        return {k: v for k, v in edge_index.items() if k in relations and v.numel()}

    def embed(self, x: dict[str, Tensor], edges: dict[tuple[str, str, str], Tensor],
              pinned: Sequence[dict[str, tuple[Tensor, Tensor]]] = (), layers: int | None = None,
              resume: tuple[int, dict[str, Tensor]] | None = None) -> dict[str, Tensor]:
        """Every node's embedding after ``layers`` rounds of message passing (all of them by default).

        Args:
            pinned: per round (0: the encoding), type → (rows, values) that replace those rows' embeddings after it:
                nodes whose embeddings another process computes (a rank's neighbours on other ranks).
            resume: (j, the embeddings after j rounds, ``pinned[j]`` not applied yet): go on from there.
        """
        j, h = (0, {t: torch.relu(self.encode[t](v)) for t, v in x.items()}) if resume is None else resume
        h = _pin(h, pinned, j)
        for k in range(j, self.config.layers if layers is None else layers):
            update = self.convs[k](h, edges) if edges else {}
            h = {t: self.norms[k][t](v + self.drop(torch.relu(update[t])) if t in update else v) for t, v in h.items()}
            h = _pin(h, pinned, k + 1)
        return h

    def pooled_sums(self, h: dict[str, Tensor]) -> Tensor:
        """float64[types, 2 * hidden + 1]: per node type, the sum of the embeddings, of their pooling, and their
        count; summed over parts of a step, ``context_of`` makes them the step's context."""
        rows = []
        for t in NODE_TYPES:
            v = h.get(t)
            if v is None or not len(v):
                rows.append(torch.zeros(2 * self.config.hidden + 1, dtype=torch.float64))
            else:
                rows.append(torch.cat([v.sum(0), self.pool(v).sum(0), torch.tensor([len(v)])]).double())
        return torch.stack(rows)

    def context_of(self, sums: Tensor, world: float) -> Tensor:
        """The step's context (what ``forward`` pools) from ``pooled_sums`` added over the step's parts."""
        hidden, pooled = self.config.hidden, []
        for row in sums:
            count = float(row[-1])
            if count == 0:
                pooled += [torch.zeros(hidden), torch.zeros(hidden)]
            else:
                pooled += [(row[:hidden] / count).float(), (row[hidden:2 * hidden] / world / 1e3).float()]
        return torch.cat(pooled)

    def readout(self, x: dict[str, Tensor], h: dict[str, Tensor], edges: dict[tuple[str, str, str], Tensor],
                context: Tensor, rows: dict[str, Tensor] | None = None) -> Output:
        """The heads, given the embeddings ``h`` and the step's ``context``; with ``rows`` (type → rows), the node
        heads and the step time of those rows only (a rank's own nodes among its neighbours')."""
        on_path, share, terminal, stop, kappa, proposals, gains = {}, {}, {}, {}, {}, [], []
        mine_x, mine_h = (x, h) if rows is None else ({t: v[rows[t]] for t, v in x.items()},
                                                      {t: v[rows[t]] for t, v in h.items()})
        for t, v in mine_h.items():
            xt = mine_x[t]
            if not len(v):
                continue
            z = torch.cat([v, context.expand(len(v), -1)], dim=1)
            out = self.node_head(z)
            on_path[t], share[t] = out[:, 0], torch.sigmoid(out[:, 1])
            terminal[t], stop[t] = out[:, 2], out[:, 3]
            base = xt[:, _LOG_END] - _LOG_US_PER_MS
            proposals.append(base + self.time_head(z)[:, 0])
            saved_ms = torch.expm1(xt[:, _LOG_SAVED]) / 1e3
            if bool((saved_ms > 0).any()):  # the share of each node's saved time its rank gets back
                gains.append((t, _MAX_GAIN * torch.sigmoid(self.gain_head(z)[:, 0]) * saved_ms))
            if t == _INTERFERED:
                kappa[t] = torch.sigmoid(self.interference_head(z)[:, 0])
        log_observed = torch.cat(proposals).max() if proposals else torch.tensor(-math.inf)
        log_step = (log_observed + self._log_gain_factor(mine_x, gains)).reshape(1)
        return Output(on_path, share, log_step, kappa, terminal, stop, self._edge_logits(x, h, edges))

    def _edge_logits(self, x: dict[str, Tensor], h: dict[str, Tensor],
                     edges: dict[tuple[str, str, str], Tensor]) -> dict[tuple[str, str, str], Tensor]:
        index = {rel: i for i, rel in enumerate(self.config.relations)}
        out = {}
        for key, ei in edges.items():
            src, _, dst = key
            rel = self.relation_embedding.weight[index[key]].expand(ei.shape[1], -1)
            z = torch.cat([h[src][ei[0]], h[dst][ei[1]], rel, edge_times(x[src], x[dst], ei)], dim=1)
            out[key] = self.edge_head(z)[:, 0]
        return out


def interference_ms(out: Output, data: object, lever_ms: np.ndarray | None) -> Tensor:
    """What interference adds to the replay of an edit: sum of kappa * lever over the step's nodes.

    Args:
        data: the ``HeteroData`` of the step (``model_inputs``), whose ``index`` maps each type's rows
            to StepGraph positions.
        lever_ms: float[n] per StepGraph node (``replay/interference.py``, in ms); None: no edit, no change.
    """
    total = torch.zeros(())
    if lever_ms is None:
        return total
    for t, k in out.kappa.items():
        total = total + (k * torch.as_tensor(lever_ms[data[t].index.numpy()], dtype=k.dtype)).sum()  # type: ignore[index]
    return total
