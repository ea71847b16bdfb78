from __future__ import annotations

import math

import torch

from bottleneck_oracle.gnn.data import model_inputs, step_graphs
from bottleneck_oracle.gnn.model import HeteroGAT, ModelConfig
from bottleneck_oracle.gnn.train import loss_of
from tests.dag.synth_cases import synth_case


def test_heads_give_one_value_per_node_and_one_per_step() -> None:
    a, _ = synth_case("tiny", dp=2)
    g = step_graphs(a)[0]
    model = HeteroGAT(ModelConfig(relations=tuple(sorted(g.edges)), hidden=16, layers=2)).eval()
    x, edges, data = model_inputs(g)
    out = model(x, edges)
    assert {t: len(v) for t, v in out.on_path_logit.items()} == {t: len(v) for t, v in x.items()}
    assert all(((s >= 0) & (s <= 1)).all() for s in out.share.values())
    assert out.log_step_ms.shape == (1,) and torch.isfinite(out.log_step_ms).all()
    # relations the model was not built with are ignored, not an error
    unknown = dict(edges)
    unknown[("kernel", "made_up", "kernel")] = edges[("kernel", "stream_next", "kernel")]
    assert torch.equal(model(x, unknown).log_step_ms, out.log_step_ms)


def test_a_few_steps_of_adamw_fit_one_graph() -> None:
    torch.manual_seed(0)
    a, _ = synth_case("tiny", dp=2)
    g = step_graphs(a)[0]
    model = HeteroGAT(ModelConfig(relations=tuple(sorted(g.edges)), hidden=16, layers=2, dropout=0.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    x, edges, data = model_inputs(g)
    losses = []
    for _ in range(30):
        loss = loss_of(model(x, edges), data, g, g.step_ms)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    error = abs(math.exp(model.eval()(x, edges).log_step_ms.item()) / g.step_ms - 1)
    assert error < 0.1


def test_directed_and_bidirectional_variants_build_from_config() -> None:
    config = ModelConfig(relations=(("kernel", "stream_next", "kernel"),), bidirectional=False, hidden=8, layers=1)
    model = HeteroGAT(ModelConfig.from_json(config.to_json()))
    assert model.config == config
