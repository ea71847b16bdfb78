from __future__ import annotations

import numpy as np
import pytest
import torch

from bottleneck_oracle.gnn.data import step_graphs
from bottleneck_oracle.gnn.hetero import model_inputs
from bottleneck_oracle.gnn.walk import Scores, global_scores, path_loss, walk
from tests.analysis.synth_cases import synth_case
from tests.gnn.conftest import small_model


def _scores(edges: list[tuple[int, int, float]], n: int, terminal: int, stop: dict[int, float] | None = None) -> Scores:
    src, dst, logit = (torch.tensor(v) for v in zip(*edges))
    stops = torch.full((n,), -10.0)
    for node, value in (stop or {}).items():
        stops[node] = value
    ends = torch.full((n,), -10.0)
    ends[terminal] = 10.0
    return Scores(src.long(), dst.long(), logit.float(), ends, stops)


def test_the_walk_follows_the_best_edge_back_from_the_terminal() -> None:
    # 0 → 1 → 2 and a weaker 3 → 2: the path is 0, 1, 2
    scores = _scores([(0, 1, 3.0), (1, 2, 5.0), (3, 2, 1.0)], 4, terminal=2)
    assert walk(scores).tolist() == [True, True, True, False]
    # stopping at 1 scores above the edge into it
    scores = _scores([(0, 1, 3.0), (1, 2, 5.0), (3, 2, 1.0)], 4, terminal=2, stop={1: 4.0})
    assert walk(scores).tolist() == [False, True, True, False]


def test_the_walk_comes_back_to_a_parent_after_each_child_and_ends() -> None:
    # parent 0 with children 1 and 2 (nest both ways, a cycle), 3 before the parent, 4 before 3
    edges = [(0, 1, 2.0), (0, 2, 2.0), (1, 0, 3.0), (2, 0, 4.0), (3, 0, 1.0), (4, 3, -1.0)]
    visited = walk(_scores(edges, 5, terminal=0, stop={3: 0.0}))
    assert visited.tolist() == [True, True, True, True, False]


def test_path_loss_is_lower_when_the_scores_follow_the_true_path() -> None:
    edges = [(0, 1, 0.0), (1, 2, 0.0), (3, 2, 0.0)]
    flat = _scores(edges, 4, terminal=2, stop={0: 0.0})
    good = _scores([(0, 1, 4.0), (1, 2, 4.0), (3, 2, -4.0)], 4, terminal=2, stop={0: 4.0})
    bad = _scores([(0, 1, -4.0), (1, 2, -4.0), (3, 2, 4.0)], 4, terminal=3, stop={0: -4.0})
    path = np.array([0, 1, 2])
    losses = [float(path_loss(s, path)) for s in (good, flat, bad)]
    assert losses[0] < losses[1] < losses[2]
    assert float(path_loss(flat, np.zeros(0, dtype=np.int64))) == 0.0
    flat.edge.requires_grad_(True)
    path_loss(flat, path).backward()
    assert flat.edge.grad[1] < 0 < flat.edge.grad[2]  # raise the true edge into 2, lower the other


def test_a_steps_path_label_runs_along_its_edges() -> None:
    a, _ = synth_case("tiny", dp=2)
    for g in step_graphs(a):
        assert set(g.path.tolist()) == set(np.flatnonzero(g.on_path).tolist())
        joined = {(int(s), int(d)) for pair in g.edges.values() for s, d in pair.T}
        steps = list(zip(g.path[:-1].tolist(), g.path[1:].tolist()))
        assert sum(step in joined for step in steps) >= 0.95 * len(steps)


def test_global_scores_put_every_edge_at_its_step_graph_positions() -> None:
    a, _ = synth_case("tiny", dp=2)
    g = step_graphs(a)[0]
    model = small_model(g).eval()
    x, edges, data = model_inputs(g)
    with torch.no_grad():
        scores = global_scores(model(x, edges), data, len(g))
    assert len(scores.terminal) == len(scores.stop) == len(g)
    got = sorted(zip(scores.src.tolist(), scores.dst.tolist()))
    want = sorted((int(s), int(d)) for pair in g.edges.values() for s, d in pair.T)
    assert got == want
    assert walk(scores).any()


@pytest.mark.parametrize("seed", range(5))
def test_a_walk_over_a_graph_in_parts_is_the_walk_over_the_whole(seed: int) -> None:
    """A step held a rank at a time (``gnn/scan_model.py``): the parts entered as the walk goes, ties included."""
    from bottleneck_oracle.gnn.walk import WalkPart, walk_parts

    rng = np.random.default_rng(seed)
    n, e = 80, 400
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    edge = np.round(rng.normal(size=e), 1).astype(np.float32)  # rounded: ties
    terminal, stop = rng.normal(size=n).astype(np.float32), (rng.normal(size=n) - 1.5).astype(np.float32)
    whole = walk(Scores(*(torch.from_numpy(a) for a in (src, dst, edge, terminal, stop))))
    part_of = np.sort(rng.integers(0, 4, n))  # four parts of consecutive nodes
    parts = {k: WalkPart.of(np.flatnonzero(part_of == k), stop[part_of == k], dst[part_of[dst] == k],
                            part_of[src[part_of[dst] == k]], src[part_of[dst] == k], edge[part_of[dst] == k])
             for k in range(4)}
    start = int(np.argmax(terminal))
    visited = walk_parts((int(part_of[start]), start), parts.__getitem__, e)
    assert np.array_equal(np.sort(np.concatenate(list(visited.values()))), np.flatnonzero(whole))
    assert len(visited) > 1
