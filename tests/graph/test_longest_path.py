from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from bottleneck_oracle.graph.longest_path import index_edges, latest_finish, longest_path
from bottleneck_oracle.errors import GraphError


def _random_dag(seed: int, n: int, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    u, v = np.triu_indices(n, k=1)
    keep = rng.random(len(u)) < p
    perm = rng.permutation(n)  # node ids not in topological order
    src, dst = perm[u[keep]], perm[v[keep]]
    return src, dst, rng.integers(0, 1000, len(src))


def _path_weight(path: list[int], weights: dict[tuple[int, int], int]) -> int:
    return sum(weights[(a, b)] for a, b in zip(path, path[1:]))


@pytest.mark.parametrize("seed", range(8))
def test_longest_path_matches_networkx_on_random_dags(seed: int) -> None:
    n = 300
    src, dst, w = _random_dag(seed, n, 0.03)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    weights: dict[tuple[int, int], int] = {}
    for a, b, c in zip(src.tolist(), dst.tolist(), w.tolist()):
        g.add_edge(a, b, weight=c)
        weights[(a, b)] = c
    dist, pred = longest_path(index_edges(n, src, dst), w)
    expected = nx.dag_longest_path_length(g, weight="weight")
    assert dist.max() == expected
    # our path (followed back from the farthest node) is a real path of that weight
    v = int(dist.argmax())
    path = [v]
    while pred[v] >= 0:
        v = int(src[pred[v]])
        path.append(v)
    path.reverse()
    assert _path_weight(path, weights) == expected
    assert _path_weight(nx.dag_longest_path(g, weight="weight"), weights) == expected


def test_longest_path_ignores_negative_weight_edges() -> None:
    src, dst = np.array([0, 0, 1]), np.array([1, 2, 2])
    dist, pred = longest_path(index_edges(3, src, dst), np.array([5, 1, -1]))
    assert dist.tolist() == [0, 5, 1]
    assert pred.tolist() == [-1, 0, 1]


def test_latest_finish_gives_zero_slack_on_the_longest_path() -> None:
    src, dst, w = np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]), np.array([4, 1, 4, 2])
    index = index_edges(4, src, dst)
    dist, _ = longest_path(index, w)
    lf = latest_finish(index, w, np.full(4, dist.max()))
    assert (lf - dist).tolist() == [0, 0, 5, 0]


def test_index_edges_rejects_a_cycle() -> None:
    with pytest.raises(GraphError) as err:
        index_edges(3, np.array([0, 1, 2]), np.array([1, 2, 0]))
    assert "cycle" in str(err.value)
