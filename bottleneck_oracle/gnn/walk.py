"""The critical path read off the model's scores: a walk back from the step's end along binding edges.

The model scores every node as the step's last (terminal) and first (stop) path
node, and every edge u → v (a relation of the step graph, reverse ones included)
as what released v. The walk starts at the best terminal and steps back along
the best-scored edge into the current node that it has not taken yet, until
stopping scores higher than every such edge. Taking each edge once is what lets
it come back to a parent after each of its children, as the true path does, and
ends every walk. ``walk_parts`` walks a graph held in parts (a rank's nodes each,
``gnn/scan_model.py``), entering each as it goes. Trained as a softmax over each node's incoming edges and its
stop (``path_loss``), the same scores serve both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["Scores", "WalkPart", "global_scores", "path_loss", "walk", "walk_parts"]


@dataclass(frozen=True, slots=True)
class Scores:
    """The walk's scores over a step graph's node positions (global, not per node type).

    Args:
        src, dst (Tensor): int64[E] edge ends.
        edge (Tensor): float[E] binding logits.
        terminal, stop (Tensor): float[n] node logits.
    """

    src: Tensor
    dst: Tensor
    edge: Tensor
    terminal: Tensor
    stop: Tensor


def global_scores(out, data, n: int) -> Scores:  # type: ignore[no-untyped-def]
    """Gathers an Output's per-type walk scores onto the ``n`` node positions of its step graph
    (``data``: the HeteroData that ``model_inputs`` returned, whose stores hold each node's position)."""
    terminal = torch.full((n,), -1e4)
    stop = torch.full((n,), -1e4)
    for t, logits in out.terminal_logit.items():
        idx = data[t].index
        terminal = terminal.index_put((idx,), logits)
        stop = stop.index_put((idx,), out.stop_logit[t])
    src, dst, edge = [], [], []
    for (s, rel, d), logits in out.edge_logit.items():
        ei = data[(s, rel, d)].edge_index
        src.append(data[s].index[ei[0]])
        dst.append(data[d].index[ei[1]])
        edge.append(logits)
    if not edge:
        empty = torch.zeros(0, dtype=torch.long)
        return Scores(empty, empty, torch.zeros(0), terminal, stop)
    return Scores(torch.cat(src), torch.cat(dst), torch.cat(edge), terminal, stop)


def path_loss(scores: Scores, path: np.ndarray) -> Tensor:
    """Cross-entropy of the true walk: the terminal among all nodes, then at each path node the edge
    from the node before it (any relation joining them) among its incoming edges and stopping, and
    stopping at the first. Steps between nodes no edge joins are left out. 0 for an empty path."""
    n = len(scores.terminal)
    if not len(path):
        return torch.zeros(())
    loss = torch.logsumexp(scores.terminal, 0) - scores.terminal[int(path[-1])]
    src, dst = scores.src.numpy(), scores.dst.numpy()
    # per node: logsumexp over its incoming edges and its stop
    top = torch.full((n,), -1e4).scatter_reduce(0, scores.dst, scores.edge.detach(), reduce="amax")
    top = torch.maximum(top, scores.stop.detach())
    total = torch.zeros(n).index_add(0, scores.dst, torch.exp(scores.edge - top[scores.dst]))
    lse = torch.log(total + torch.exp(scores.stop - top)) + top
    # true steps (u, v): consecutive path nodes; the edges that join them
    steps = np.unique(path[:-1] * n + path[1:])
    key = src.astype(np.int64) * n + dst
    hit = np.flatnonzero(np.isin(key, steps))
    terms = [lse[int(path[0])] - scores.stop[int(path[0])]]
    if len(hit):
        which = torch.from_numpy(np.searchsorted(steps, key[hit]))
        logits = scores.edge[torch.from_numpy(hit)]
        m = torch.full((len(steps),), -1e4).scatter_reduce(0, which, logits.detach(), reduce="amax")
        joined = torch.zeros(len(steps)).index_add(0, which, torch.exp(logits - m[which]))
        found = joined > 0
        log_true = torch.log(joined[found]) + m[found]
        terms.append((lse[torch.from_numpy(steps % n)[found]] - log_true).sum())
    return loss + torch.stack([t.sum() for t in terms]).sum() / (1 + len(steps))


@dataclass(frozen=True, slots=True)
class WalkPart:
    """A part of a step graph's walk scores (one rank's nodes, or every node): its nodes and the edges into them.

    Args:
        node (np.ndarray): int64[n] its nodes' ids, increasing; ``stop``: float[n] their stop logits.
        edge (np.ndarray): float64[E] the binding logit of each edge into them.
        src_part, src (np.ndarray): int64[E] each edge's source: its part and node id.
        order, first (np.ndarray): the edges by target: those into the i-th node are ``order[first[i]:first[i + 1]]``,
            in their given order.
    """

    node: np.ndarray
    stop: np.ndarray
    edge: np.ndarray
    src_part: np.ndarray
    src: np.ndarray
    order: np.ndarray
    first: np.ndarray

    @classmethod
    def of(cls, node: np.ndarray, stop: np.ndarray, dst: np.ndarray, src_part: np.ndarray, src: np.ndarray,
           edge: np.ndarray) -> WalkPart:
        at = np.searchsorted(node, dst)
        order = np.argsort(at, kind="stable")
        return cls(node, stop, edge.astype(np.float64), src_part, src, order,
                   np.searchsorted(at[order], np.arange(len(node) + 1)))


def walk_parts(start: tuple[int, int], part: Callable[[int], WalkPart], edges: int) -> dict[int, np.ndarray]:
    """The nodes (ids, per part) the greedy walk back from ``start`` (a part and a node) visits, over a graph held
    in parts that ``part`` gives as the walk enters them; ``edges``: how many the graph has in all."""
    visited: dict[int, set[int]] = defaultdict(set)
    used: dict[int, set[int]] = defaultdict(set)
    k, v = start
    for _ in range(edges + 1):  # every step takes an edge not taken before
        p = part(k)
        visited[k].add(v)
        at = int(np.searchsorted(p.node, v))
        into = [e for e in p.order[p.first[at]:p.first[at + 1]].tolist() if e not in used[k]]
        if not into:
            break
        best = into[int(np.argmax(p.edge[into]))]
        if p.edge[best] <= p.stop[at]:
            break
        used[k].add(best)
        k, v = int(p.src_part[best]), int(p.src[best])
    return {k: np.array(sorted(s), dtype=np.int64) for k, s in visited.items()}


def walk(scores: Scores) -> np.ndarray:
    """bool[n]: the nodes the greedy walk back from the best terminal visits."""
    n = len(scores.terminal)
    visited = np.zeros(n, dtype=bool)
    if n == 0:
        return visited
    src = scores.src.numpy()
    whole = WalkPart.of(np.arange(n), scores.stop.detach().numpy(), scores.dst.numpy(), np.zeros(len(src), np.int64),
                        src, scores.edge.detach().numpy())
    start = int(np.argmax(scores.terminal.detach().numpy()))
    visited[walk_parts((0, start), lambda _: whole, len(src)).get(0, [])] = True
    return visited
