"""A tiny corpus and a tiny model trained on it, built once per test session by our own code."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bottleneck_oracle.gnn.corpus import Sample as GraphSample
from bottleneck_oracle.gnn.corpus import load_split
from bottleneck_oracle.gnn.data import StepGraph
from bottleneck_oracle.gnn.model import HeteroGAT, ModelConfig
from bottleneck_oracle.gnn.train import Checkpoint, TrainConfig, train
from bottleneck_oracle.synth import SynthConfig
from bottleneck_oracle.synth.dataset import Sample, build_dataset
from bottleneck_oracle.truth.injection import parse_injection

# Two test workers share two cores: torch's own thread pool in each would only make them wait on each other.
torch.set_num_threads(1)


def small_model(g: StepGraph, **config: object) -> HeteroGAT:
    """An untrained 2-layer, 16-wide model over the relations of ``g``."""
    return HeteroGAT(ModelConfig(relations=tuple(sorted(g.edges)), hidden=16, layers=2, **config))  # type: ignore[arg-type]


def _plan() -> list[Sample]:
    stall = (parse_injection("dataloader_stall@3:0=30ms"),)
    return [
        Sample("t0", "train", ("tiny", 2, 1, 1), SynthConfig(model="tiny", dp=2, steps=4, seed=1)),
        Sample("t1", "train", ("tiny", 1, 2, 1), SynthConfig(model="tiny", tp=2, steps=4, seed=2, injections=stall)),
        Sample("t2", "train", ("tiny", 2, 1, 1), SynthConfig(model="tiny", dp=2, steps=4, seed=3, hardware="A100")),
        Sample("v0", "val", ("tiny", 1, 1, 2), SynthConfig(model="tiny", pp=2, microbatches=2, steps=4, seed=4)),
        Sample("s0", "test", ("tiny", 4, 1, 1), SynthConfig(model="tiny", dp=4, steps=4, seed=5)),
        Sample("o0", "ood", ("tiny", 2, 2, 1), SynthConfig(model="tiny", dp=2, tp=2, steps=4, seed=6)),
    ]


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    build_dataset(out, 6, samples=_plan())
    return out


@pytest.fixture(scope="session")
def tiny_splits(tiny_corpus: Path) -> dict[str, list[GraphSample]]:
    return {split: load_split(tiny_corpus, split) for split in ("train", "val", "test", "ood")}


TINY_TRAINING = TrainConfig(epochs=2, hidden=16, layers=2, heads=2, seed=0, val_graphs=8, lr=1e-2, graphs_per_sample=8,
                            refit_steps=8)


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_splits: dict[str, list[GraphSample]]) -> Checkpoint:
    return train(tiny_splits["train"], tiny_splits["val"], TINY_TRAINING)
