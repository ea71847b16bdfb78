"""The critical path read off the model's scores: a walk back from the step's end along binding edges.

The model scores every node as the step's last (terminal) and first (stop) path
node, and every edge u → v (a relation of the step graph, reverse ones included)
as what released v. The walk starts at the best terminal and steps back along
the best-scored edge into the current node that it has not taken yet, until
stopping scores higher than every such edge. Taking each edge once is what lets
it come back to a parent after each of its children, as the true path does, and
ends every walk. Trained as a softmax over each node's incoming edges and its
stop (``path_loss``), the same scores serve both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["Scores", "global_scores", "path_loss", "walk"]


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


def walk(scores: Scores) -> np.ndarray:
    """bool[n]: the nodes the greedy walk back from the best terminal visits."""
    n = len(scores.terminal)
    visited = np.zeros(n, dtype=bool)
    if n == 0:
        return visited
    src, dst = scores.src.numpy(), scores.dst.numpy()
    edge = scores.edge.detach().numpy().astype(np.float64)
    stop = scores.stop.detach().numpy()
    order = np.argsort(dst, kind="stable")
    first = np.searchsorted(dst[order], np.arange(n + 1))
    used = np.zeros(len(src), dtype=bool)
    v = int(np.argmax(scores.terminal.detach().numpy()))
    for _ in range(len(src) + 1):  # every step takes an edge not taken before
        visited[v] = True
        into = order[first[v]:first[v + 1]]
        into = into[~used[into]]
        if not len(into):
            break
        best = into[np.argmax(edge[into])]
        if edge[best] <= stop[v]:
            break
        used[best] = True
        v = int(src[best])
    return visited
