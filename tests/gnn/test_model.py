from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bottleneck_oracle.gnn.data import step_graphs
from bottleneck_oracle.gnn.hetero import model_inputs
from bottleneck_oracle.gnn.model import HeteroGAT, ModelConfig
from bottleneck_oracle.gnn.train import Item, loss_of
from tests.analysis.synth_cases import synth_case
from tests.gnn.conftest import small_model


def _untrained(case: str):  # type: ignore[no-untyped-def]
    """An untrained small model over the first step of a 2-rank synthetic ``case``, and its inputs."""
    a, _ = synth_case(case, dp=2)
    g = step_graphs(a)[0]
    x, edges, data = model_inputs(g)
    return g, small_model(g).eval(), x, edges, data


def test_heads_give_one_value_per_node_and_one_per_step() -> None:
    g, model, x, edges, data = _untrained("tiny")
    out = model(x, edges)
    assert {t: len(v) for t, v in out.on_path_logit.items()} == {t: len(v) for t, v in x.items()}
    assert all(((s >= 0) & (s <= 1)).all() for s in out.share.values())
    assert out.log_step_ms.shape == (1,) and torch.isfinite(out.log_step_ms).all()
    assert {t: len(v) for t, v in out.terminal_logit.items()} == {t: len(v) for t, v in x.items()}
    assert {t: len(v) for t, v in out.stop_logit.items()} == {t: len(v) for t, v in x.items()}
    assert {k: len(v) for k, v in out.edge_logit.items()} == {k: v.shape[1] for k, v in edges.items() if v.numel()}
    # relations the model was not built with are ignored, not an error
    unknown = dict(edges)
    unknown[("kernel", "made_up", "kernel")] = edges[("kernel", "stream_next", "kernel")]
    assert torch.equal(model(x, unknown).log_step_ms, out.log_step_ms)


def test_a_few_steps_of_adamw_fit_one_graph() -> None:
    torch.manual_seed(0)
    a, _ = synth_case("tiny", dp=2)
    g = step_graphs(a)[0]
    model = small_model(g, dropout=0.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    x, edges, data = model_inputs(g)
    losses = []
    for _ in range(30):
        loss = loss_of(model(x, edges), data, g, Item(g, None, 1.0, g.step_ms, g.step_ms, None))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    error = abs(math.exp(model.eval()(x, edges).log_step_ms.item()) / g.step_ms - 1)
    assert error < 0.1


def test_edge_times_are_the_gaps_between_the_ends_of_an_edge() -> None:
    from bottleneck_oracle.gnn.data import FEATURES
    from bottleneck_oracle.gnn.model import edge_times

    x = torch.zeros(2, len(FEATURES))
    # u starts at 1 ms and lasts 2 ms; v starts at 3.5 ms and lasts 1 ms (features in units of 100 ms)
    x[0, FEATURES.index("gstart_ms")], x[0, FEATURES.index("dur_ms")] = 0.01, 0.02
    x[1, FEATURES.index("gstart_ms")], x[1, FEATURES.index("dur_ms")] = 0.035, 0.01
    got = edge_times(x, x, torch.tensor([[0, 1], [1, 0]]))
    want = torch.tensor([[500.0, 1500.0, 2500.0], [-3500.0, -1500.0, -2500.0]])  # µs
    assert torch.allclose(got, torch.sign(want) * torch.log1p(want.abs()), atol=1e-3)


def test_interference_is_kappa_times_lever_over_kernels() -> None:
    from bottleneck_oracle.gnn.model import interference_ms

    g, model, x, edges, data = _untrained("gpt2-small")
    with torch.no_grad():
        out = model(x, edges)
    assert set(out.kappa) == {"kernel"} and bool(((out.kappa["kernel"] > 0) & (out.kappa["kernel"] < 1)).all())
    lever = np.zeros(len(g), dtype=np.float32)
    kernels = data["kernel"].index.numpy()
    lever[kernels[:3]] = [1.0, 2.0, -0.5]
    lever[np.setdiff1d(np.arange(len(g)), kernels)[:5]] = 7.0  # other node types have no kappa
    want = float((out.kappa["kernel"][:3] * torch.tensor([1.0, 2.0, -0.5])).sum())
    assert float(interference_ms(out, data, lever)) == pytest.approx(want, rel=1e-5)
    assert float(interference_ms(out, data, None)) == 0.0


def test_directed_and_bidirectional_variants_build_from_config() -> None:
    config = ModelConfig(relations=(("kernel", "stream_next", "kernel"),), bidirectional=False, hidden=8, layers=1)
    model = HeteroGAT(ModelConfig.from_json(config.to_json()))
    assert model.config == config


def test_a_graph_split_in_parts_embeds_and_reads_out_as_the_whole() -> None:
    """What a rank computes: the step's context from its parts' pooled sums, and a row's embeddings pinned from
    elsewhere (a halo) carried into the next layer: the forward pass's, and changed when the pinned rows change."""
    _, model, x, edges, _ = _untrained("tiny")
    with torch.no_grad():
        whole = model(x, edges)
        h = model.embed(x, model.known_relations(edges))
        halves = {t: (v[: len(v) // 2], v[len(v) // 2:]) for t, v in h.items()}
        sums = sum(model.pooled_sums({t: p[i] for t, p in halves.items()}) for i in (0, 1))
        context = model.context_of(sums, world=2)  # type: ignore[arg-type]
        again = model.readout(x, h, model.known_relations(edges), context)
        assert torch.allclose(again.log_step_ms, whole.log_step_ms, atol=1e-6)
        for t in whole.on_path_logit:
            assert torch.allclose(again.on_path_logit[t], whole.on_path_logit[t], atol=1e-5)
        # the first layer's embeddings of some kernels pinned to what they are: nothing moves; pinned elsewhere: the
        # layers after read them
        one = model.embed(x, model.known_relations(edges), layers=1)
        rows = torch.arange(3)
        same = model.embed(x, model.known_relations(edges), [{}, {"kernel": (rows, one["kernel"][rows])}])
        moved = model.embed(x, model.known_relations(edges), [{}, {"kernel": (rows, one["kernel"][rows] + 1.0)}])
    assert all(torch.allclose(same[t], h[t], atol=1e-6) for t in h)
    assert not torch.allclose(moved["kernel"], h["kernel"], atol=1e-3)
