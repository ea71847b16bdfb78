"""HeteroGAT: a GATConv per relation, residuals and layer norm, a node head and a step-time head.

The step-time head reads the step's end off the graph: every node proposes
"the step ends at my end plus what still follows me" in log space, and the
observed step is the largest proposal. An edit then gives time back: each
edited node returns to its rank a learned share (0 to 1.5) of the time the edit
saved it, near 1 on the critical path, near 0 with slack, above 1 where
shortening it also ends interference with overlapping work; the step ends with
its latest rank after what each rank got back. A second graph-level head learns what replaying
the edited DAG misses (interference between overlapping work): the correction,
in log space, to apply to the replay's answer. Relations are fixed at construction (the
corpus's metadata); an unseen relation at inference is ignored.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch_geometric.nn import GATConv, HeteroConv

from bottleneck_oracle.gnn.data import FEATURES, NODE_TYPES

__all__ = ["ModelConfig", "HeteroGAT", "Output"]

_LOG_END = FEATURES.index("log_end_us")
_LOG_SAVED = FEATURES.index("log_saved_us")
_LOG_SPAN = FEATURES.index("log_rank_span_us")
_RANK_FRAC = FEATURES.index("rank_frac")
_LOG2_WORLD = FEATURES.index("log2_world")
_LOG_US_PER_MS = math.log(1e3)
_MAX_GAIN = 1.5  # a node's speed-up can give back more than its own saved time (interference)
_CORRECTION_SCALE = 100.0  # corrections are fractions of a percent: the head speaks in percent


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
    """Per node type: on-path logit and share of the wall time; the step's log wall time in ms."""

    on_path_logit: dict[str, Tensor]
    share: dict[str, Tensor]
    log_step_ms: Tensor  # [1]
    log_replay_correction: Tensor  # [1]: log(true / replayed) step time under the graph's edit


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
        self.node_head = nn.Sequential(nn.Linear(h + context, h), nn.ReLU(), nn.Linear(h, 2))
        self.time_head = nn.Sequential(nn.Linear(h + context, h), nn.ReLU(), nn.Linear(h, 1))
        self.gain_head = nn.Sequential(nn.Linear(h + context, h), nn.ReLU(), nn.Linear(h, 1))
        self.correction_head = nn.Sequential(nn.Linear(context, h), nn.ReLU(), nn.Linear(h, 1))
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
        h = {t: torch.relu(self.encode[t](v)) for t, v in x.items()}
        relations = set(self.config.relations)
        edges = {k: v for k, v in edge_index.items() if k in relations and v.numel()}
        for conv, norms in zip(self.convs, self.norms):
            update = conv(h, edges) if edges else {}
            h = {t: norms[t](v + self.drop(torch.relu(update[t])) if t in update else v) for t, v in h.items()}
        world = x[next(iter(x))][0, _LOG2_WORLD].exp2() if x else torch.tensor(1.0)
        pooled = []
        for t in NODE_TYPES:
            v = h.get(t)
            if v is None or not len(v):
                pooled += [torch.zeros(self.config.hidden), torch.zeros(self.config.hidden)]
            else:  # mean: what the step is like; per-rank sum: how much of it there is
                pooled += [v.mean(0), self.pool(v).sum(0) / world / 1e3]
        context = torch.cat(pooled)
        on_path, share, proposals, gains = {}, {}, [], []
        for t, v in h.items():
            if not len(v):
                continue
            z = torch.cat([v, context.expand(len(v), -1)], dim=1)
            out = self.node_head(z)
            on_path[t], share[t] = out[:, 0], torch.sigmoid(out[:, 1])
            base = x[t][:, _LOG_END] - _LOG_US_PER_MS
            proposals.append(base + self.time_head(z)[:, 0])
            saved_ms = torch.expm1(x[t][:, _LOG_SAVED]) / 1e3
            if bool((saved_ms > 0).any()):  # the share of each node's saved time its rank gets back
                gains.append((t, _MAX_GAIN * torch.sigmoid(self.gain_head(z)[:, 0]) * saved_ms))
        log_observed = torch.cat(proposals).max()
        log_step = (log_observed + self._log_gain_factor(x, gains)).reshape(1)
        correction = self.correction_head(context) / _CORRECTION_SCALE
        return Output(on_path, share, log_step, correction)
