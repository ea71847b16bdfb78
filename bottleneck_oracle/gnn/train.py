"""Training the HeteroGAT on a corpus: AdamW, early stopping on validation, a checkpoint of weights plus JSON.

Every training step is one graph: an observed step (step time and per-node
labels) or one of its what-if variants (the true step time after the edit,
no per-node labels). A checkpoint is a folder: ``model.pt`` (the state dict,
loadable with ``weights_only=True``) and ``config.json`` (model config, feature
vocabulary, training settings and metrics).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.gnn.baselines import aggregates, fit_kappa
from bottleneck_oracle.gnn.corpus import Sample
from bottleneck_oracle.gnn.data import FEATURES, NODE_TYPES, StepGraph
from bottleneck_oracle.gnn.edits import edit_features
from bottleneck_oracle.gnn.hetero import model_inputs
from bottleneck_oracle.gnn.model import HeteroGAT, ModelConfig, Output, interference_ms
from bottleneck_oracle.gnn.shipped import CONFIG_FILE, WEIGHTS_FILE
from bottleneck_oracle.gnn.walk import global_scores, path_loss, walk
from bottleneck_oracle.graph.op_classes import OP_CLASSES

__all__ = ["TrainConfig", "Checkpoint", "train", "refit_heads", "save_checkpoint", "load_checkpoint", "items",
           "loss_of", "graph_of", "log_corrected_error", "Item", "constant_kappa", "CHECKPOINT_VERSION", "record_metrics"]

CHECKPOINT_VERSION = 3
_WEIGHTS, _CONFIG, _BASELINES = WEIGHTS_FILE, CONFIG_FILE, "baselines.npz"


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """Training settings (saved in the checkpoint)."""

    epochs: int = 30
    patience: int = 6
    lr: float = 2e-3
    weight_decay: float = 1e-4
    seed: int = 0
    hidden: int = 64
    layers: int = 3
    heads: int = 2
    dropout: float = 0.1
    bidirectional: bool = True
    max_minutes: float = 14.0  # no epoch ends past it
    refit_steps: int = 800  # then the step-time and interference heads alone (~3 min); with reading, < 20 min
    graphs_per_sample: int = 4  # drawn afresh each epoch from a sample's steps and what-if variants
    val_graphs: int = 64  # a fixed random subset of the validation graphs, scored after every epoch


@dataclass
class Checkpoint:
    """A trained model, how it was trained, its metrics, and the aggregate rows the baselines refit on."""

    model: HeteroGAT
    train: dict[str, object]
    metrics: dict[str, object] = field(default_factory=dict)
    baseline_rows: tuple[np.ndarray, np.ndarray] | None = None  # (aggregates, log step ms)


class Item(NamedTuple):
    """One training graph: an observed step (no mask, no levers) or a what-if variant of one."""

    graph: StepGraph
    mask: np.ndarray | None
    speedup: float
    true_ms: float
    replay_ms: float
    lever_ms: np.ndarray | None


def items(sample: Sample) -> list[Item]:
    """Every observed step and what-if variant of ``sample``."""
    out = [Item(g, None, 1.0, g.step_ms, r, None) for g, r in zip(sample.graphs, sample.replay_ms)]
    for w in sample.whatifs:
        out += [Item(sample.graphs[i], mask, w.speedup, truth, r, lever)
                for i, mask, truth, r, lever in zip(w.graphs, w.masks, w.true_ms, w.replay_ms, w.levers)]
    return out


def graph_of(item: Item) -> StepGraph:
    return item.graph if item.mask is None else edit_features(item.graph, item.mask, item.speedup, item.true_ms)


def log_corrected_error(out: Output, data: object, item: Item) -> Tensor:
    """log(corrected replay / truth): the replay plus what the model's kappas add through the levers."""
    corrected = item.replay_ms + interference_ms(out, data, item.lever_ms)
    return torch.log(corrected.clamp(min=1e-3) / item.true_ms)


def loss_of(out: Output, data: object, g: StepGraph, item: Item) -> Tensor:
    """Squared log error of the step time and (in percent, for a what-if) of the corrected replay, plus
    on the observed graph: BCE of the on-path flag, the squared error of sqrt(share) and the
    cross-entropy of the walk along the true critical path."""
    loss = (out.log_step_ms - math.log(g.step_ms)).pow(2).sum()
    if item.lever_ms is not None:
        loss = loss + (log_corrected_error(out, data, item) * 100).pow(2)
    if not g.has_labels:
        return loss
    logits = torch.cat([out.on_path_logit[t] for t in out.on_path_logit])
    share = torch.cat([out.share[t] for t in out.share])
    on_path = torch.cat([data[t].on_path for t in out.on_path_logit])  # type: ignore[index]
    true_share = torch.cat([data[t].share for t in out.share])  # type: ignore[index]
    bce = F.binary_cross_entropy_with_logits(logits, on_path)  # unweighted: 0.5 stays the decision threshold
    walk = path_loss(global_scores(out, data, len(g)), g.path)
    return loss + bce + 10 * F.mse_loss((share + 1e-6).sqrt(), true_share.clamp(min=0).sqrt()) + walk


def _relations(samples: list[Sample]) -> tuple[tuple[str, str, str], ...]:
    return tuple(sorted({key for s in samples for g in s.graphs for key in g.edges}))


def _validate(model: HeteroGAT, val: list[Item]) -> tuple[float, float]:
    """Mean relative error of the step time and of the corrected replay; mean share of the walk that
    misses the true critical path (1 - Jaccard of the nodes) on observed steps."""
    model.eval()
    errors, misses = [], []
    with torch.no_grad():
        for item in val:
            g = graph_of(item)
            x, edges, data = model_inputs(g)
            out = model(x, edges)
            errors.append(abs(math.exp(float(out.log_step_ms)) / g.step_ms - 1))
            if item.lever_ms is not None:
                errors.append(abs(math.expm1(float(log_corrected_error(out, data, item)))))
            if g.has_labels and g.on_path.any():
                visited = walk(global_scores(out, data, len(g)))
                misses.append(1 - (visited & g.on_path).sum() / (visited | g.on_path).sum())
    mean = (lambda v: float(np.mean(v)) if v else 0.0)
    return (mean(errors) if errors else float("inf")), mean(misses)


def train(train_set: list[Sample], val_set: list[Sample], config: TrainConfig = TrainConfig(),
          progress: Callable[[int, int, float, float], None] | None = None) -> Checkpoint:
    """Trains a HeteroGAT; keeps the weights of the epoch with the lowest validation score: the
    step-time error plus the share of the walk that misses the critical path.

    Args:
        progress: called after each epoch with (epoch, epochs, train loss, validation score).

    Raises:
        ConfigError: no training graph.
    """
    per_sample = [items(s) for s in train_set]
    val_items = [item for s in val_set for item in items(s)]
    val_items = random.Random(config.seed).sample(val_items, min(len(val_items), config.val_graphs))
    if not any(per_sample):
        raise ConfigError("train: the training split holds no step graph")
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    model = HeteroGAT(ModelConfig(relations=_relations(train_set), hidden=config.hidden, layers=config.layers,
                                  heads=config.heads, dropout=config.dropout, bidirectional=config.bidirectional))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(config.epochs, 1))
    best, best_state, stale, history = float("inf"), None, 0, []
    started = time.monotonic()
    rng = random.Random(config.seed)
    for epoch in range(1, config.epochs + 1):
        model.train()
        drawn = [item for pool in per_sample for item in rng.sample(pool, min(config.graphs_per_sample, len(pool)))]
        rng.shuffle(drawn)
        total = 0.0
        for item in drawn:
            g = graph_of(item)
            x, edges, data = model_inputs(g)
            loss = loss_of(model(x, edges), data, g, item)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            total += loss.item()
        scheduler.step()
        val_mape, val_miss = _validate(model, val_items)
        score = val_mape + val_miss
        history.append({"epoch": epoch, "train_loss": total / len(drawn), "val_step_mape": val_mape,
                        "val_walk_miss": val_miss})
        if progress:
            progress(epoch, config.epochs, total / len(drawn), score)
        if score < best:
            best, stale = score, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
        elapsed = time.monotonic() - started
        if stale >= config.patience or (elapsed + elapsed / epoch) / 60 > config.max_minutes:
            break  # out of patience, or another epoch would end past the time budget
    if best_state is not None:
        model.load_state_dict(best_state)
    every = [item for pool in per_sample for item in pool]
    refit_started = time.monotonic()
    refit_heads(model, every, config.refit_steps, config.seed)
    train_info = {
        "config": {k: getattr(config, k) for k in TrainConfig.__dataclass_fields__},
        "history": history, "best_val_score": best, "seconds": round(time.monotonic() - started, 1),
        "refit_seconds": round(time.monotonic() - refit_started, 1),
        "kappa_fit": constant_kappa(every),
        "graphs": {"train": sum(map(len, per_sample)), "val": len(val_items)},
        "samples": {"train": [s.sample_id for s in train_set], "val": [s.sample_id for s in val_set]},
    }
    rows = [(aggregates(graph_of(item)), math.log(item.true_ms)) for item in every]
    baseline_rows = (np.stack([r for r, _ in rows]), np.array([y for _, y in rows]))
    return Checkpoint(model.eval(), train_info, baseline_rows=baseline_rows)


def constant_kappa(pool: list[Item]) -> float:
    """The ``replay_kappa`` baseline's one kappa, fitted on the what-ifs of ``pool``."""
    levered = [i for i in pool if i.lever_ms is not None]
    return fit_kappa(np.array([float(i.lever_ms.sum()) for i in levered]),  # type: ignore[union-attr]
                     np.array([i.true_ms - i.replay_ms for i in levered]))


_REFIT_HEADS = ("time_head.", "interference_head.")


def refit_heads(model: HeteroGAT, pool: list[Item], steps: int, seed: int = 0) -> None:
    """Fits the step-time and interference heads alone, the rest of the model frozen, for ``steps``
    graphs drawn from ``pool``: the absolute error in percent of the step time and of the corrected
    replay. The joint loss, led by the walk, leaves these scalars a fraction of a percent off (a
    bias of the step time, the interference of a tenth of a percent); criticality does not move."""
    heads = [p for name, p in model.named_parameters() if name.startswith(_REFIT_HEADS)]
    frozen = [p for name, p in model.named_parameters() if not name.startswith(_REFIT_HEADS)]
    if not pool or steps <= 0:
        return
    for p in frozen:
        p.requires_grad_(False)
    optimizer = torch.optim.AdamW(heads, lr=1e-3, weight_decay=1e-4)
    rng = random.Random(seed)
    model.eval()  # the frozen part as at inference; the heads have no dropout
    for _ in range(steps):
        item = rng.choice(pool)
        g = graph_of(item)
        x, edges, data = model_inputs(g)
        out = model(x, edges)
        loss = ((out.log_step_ms - math.log(g.step_ms)) * 100).abs().sum()
        if item.lever_ms is not None and item.lever_ms.any():
            loss = loss + (log_corrected_error(out, data, item) * 100).abs()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for p in frozen:
        p.requires_grad_(True)


def save_checkpoint(ckpt: Checkpoint, out: Path) -> Path:
    """Writes ``out/model.pt`` and ``out/config.json``; returns ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt.model.state_dict(), out / _WEIGHTS)
    if ckpt.baseline_rows is not None:
        np.savez_compressed(out / _BASELINES, features=ckpt.baseline_rows[0], log_step_ms=ckpt.baseline_rows[1])
    meta = {
        "version": CHECKPOINT_VERSION, "model": ckpt.model.config.to_json(), "features": list(FEATURES),
        "node_types": list(NODE_TYPES), "op_classes": [list(c) for c in OP_CLASSES],
        "train": ckpt.train, "metrics": ckpt.metrics,
    }
    (out / _CONFIG).write_text(json.dumps(meta, indent=1) + "\n")
    return out


def record_metrics(path: Path, metrics: dict[str, object]) -> None:
    """Stores evaluation metrics in a checkpoint's ``config.json`` (weights untouched)."""
    config = Path(path) / _CONFIG
    meta = json.loads(config.read_text())
    meta["metrics"] = metrics
    config.write_text(json.dumps(meta, indent=1) + "\n")


def load_checkpoint(path: Path) -> Checkpoint:
    """Loads a checkpoint folder.

    Raises:
        ConfigError: missing files, another version, or a feature vocabulary unlike this code's.
    """
    path = Path(path)
    if not (path / _WEIGHTS).is_file() or not (path / _CONFIG).is_file():
        raise ConfigError(f"{path}: not a checkpoint (needs {_WEIGHTS} and {_CONFIG}); train one with `oracle train`")
    meta = json.loads((path / _CONFIG).read_text())
    if meta.get("version") != CHECKPOINT_VERSION:
        raise ConfigError(f"{path}: checkpoint version {meta.get('version')}, this code reads {CHECKPOINT_VERSION}")
    if meta["features"] != list(FEATURES) or meta["node_types"] != list(NODE_TYPES):
        raise ConfigError(f"{path}: the checkpoint's feature vocabulary differs from this code's; retrain it")
    model = HeteroGAT(ModelConfig.from_json(meta["model"]))
    model.load_state_dict(torch.load(path / _WEIGHTS, weights_only=True))
    rows = None
    if (path / _BASELINES).is_file():
        with np.load(path / _BASELINES, allow_pickle=False) as saved:
            rows = (saved["features"], saved["log_step_ms"])
    return Checkpoint(model.eval(), meta["train"], meta.get("metrics", {}), rows)
