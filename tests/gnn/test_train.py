from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.gnn.data import FEATURES
from bottleneck_oracle.gnn.hetero import model_inputs
from bottleneck_oracle.gnn.train import (
    CHECKPOINT_VERSION,
    Checkpoint,
    graph_of,
    items,
    load_checkpoint,
    loss_of,
    save_checkpoint,
    train,
)
from tests.gnn.conftest import TINY_TRAINING


def test_items_cover_observed_steps_and_every_what_if(tiny_splits) -> None:  # type: ignore[no-untyped-def]
    sample = tiny_splits["train"][0]
    got = items(sample)
    observed = [i for i in got if i[1] is None]
    assert len(observed) == len(sample.graphs)
    assert len(got) == len(sample.graphs) * (1 + len(sample.whatifs))
    assert all(i.true_ms > 0 and i.replay_ms > 0 for i in got)
    assert all((i.lever_ms is None) == (i.mask is None) for i in got)  # levers belong to edits


def test_checkpoint_round_trips_as_weights_and_json(tiny_checkpoint: Checkpoint, tmp_path: Path) -> None:
    out = save_checkpoint(tiny_checkpoint, tmp_path / "ckpt")
    meta = json.loads((out / "config.json").read_text())
    assert meta["version"] == CHECKPOINT_VERSION and meta["features"] == list(FEATURES)
    assert meta["train"]["config"]["seed"] == 0 and len(meta["train"]["history"]) >= 1
    assert meta["train"]["kappa_fit"] == 0.0  # the tiny jobs are CPU-bound: no lever, no interference
    torch.load(out / "model.pt", weights_only=True)  # a state dict, no pickled classes
    loaded = load_checkpoint(out)
    for name, value in tiny_checkpoint.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value)
    assert loaded.baseline_rows is not None
    assert loaded.baseline_rows[0].shape[0] == meta["train"]["graphs"]["train"]


def test_training_is_reproducible_by_seed(tiny_splits, tiny_checkpoint: Checkpoint) -> None:  # type: ignore[no-untyped-def]
    again = train(tiny_splits["train"], tiny_splits["val"], TINY_TRAINING)
    for name, value in tiny_checkpoint.model.state_dict().items():
        assert torch.allclose(again.model.state_dict()[name], value)
    assert again.train["history"] == tiny_checkpoint.train["history"] or all(
        a["train_loss"] == pytest.approx(b["train_loss"])
        for a, b in zip(again.train["history"], tiny_checkpoint.train["history"]))


def _mean_loss(model, samples) -> float:  # type: ignore[no-untyped-def]
    losses = []
    with torch.no_grad():
        for item in (i for s in samples for i in items(s)):
            g = graph_of(item)
            x, edges, data = model_inputs(g)
            losses.append(loss_of(model.eval()(x, edges), data, g, item).item())
    return sum(losses) / len(losses)


def test_training_lowers_the_loss(tiny_splits, tiny_checkpoint: Checkpoint) -> None:  # type: ignore[no-untyped-def]
    untrained = train(tiny_splits["train"], tiny_splits["val"], replace(TINY_TRAINING, epochs=0))
    assert untrained.train["history"] == []
    before = _mean_loss(untrained.model, tiny_splits["train"])
    assert _mean_loss(tiny_checkpoint.model, tiny_splits["train"]) < 0.8 * before


def test_bad_checkpoints_are_refused(tiny_checkpoint: Checkpoint, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a checkpoint"):
        load_checkpoint(tmp_path)
    out = save_checkpoint(tiny_checkpoint, tmp_path / "old")
    meta = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**meta, "version": 0}))
    with pytest.raises(ConfigError, match="version"):
        load_checkpoint(out)
    (out / "config.json").write_text(json.dumps({**meta, "features": meta["features"][:-1]}))
    with pytest.raises(ConfigError, match="retrain"):
        load_checkpoint(out)


def test_training_needs_graphs() -> None:
    with pytest.raises(ConfigError, match="no step graph"):
        train([], [], TINY_TRAINING)


def test_refitting_the_heads_moves_nothing_else(tiny_splits) -> None:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.gnn.train import refit_heads

    ckpt = train(tiny_splits["train"], tiny_splits["val"], replace(TINY_TRAINING, refit_steps=0))
    before = {k: v.clone() for k, v in ckpt.model.state_dict().items()}
    # the tiny model's steps are CPU-bound (no lever); give its what-ifs one on every node
    pool = [item._replace(lever_ms=np.full(len(item.graph), 0.01, np.float32))
            for s in tiny_splits["train"] for item in items(s) if item.mask is not None]
    refit_heads(ckpt.model, pool, 4)
    after = ckpt.model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert {k.split(".")[0] for k in moved} == {"time_head", "interference_head"}
    assert all(p.requires_grad for p in ckpt.model.parameters())  # unfrozen again for whoever trains next
