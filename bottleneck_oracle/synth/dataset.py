"""A corpus of synthetic training traces with ground truth, split by configuration family.

A family is (model, dp, tp, pp): every trace of one family lands in one split,
so no near-duplicate of a test graph is ever in training. Families are shuffled
by the seed and cut 70/15/15 into train/val/test; the out-of-distribution split
holds larger models on more ranks than any in-distribution family. Each sample
is a folder of rank traces, ``manifest.json`` (injected truth and step times)
and ``whatif.json`` (true step times under a few edits). A sample is complete
when its ``done`` marker exists, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.synthesize import synthesize
from bottleneck_oracle.synth.whatif import whatif, whatif_to_json
from bottleneck_oracle.truth.edits import Edit, write_whatif
from bottleneck_oracle.truth.injection import Injection
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["Sample", "plan_dataset", "build_dataset", "load_index", "SPLITS", "INDEX_NAME"]

SPLITS = ("train", "val", "test", "ood")
INDEX_NAME = "index.json"
_DONE = "done"
_HARDWARE = ("A100", "H100", "H200")
_IN_DISTRIBUTION = [  # (model, dp, tp, pp): at most 8 ranks, models up to 1b
    (m, *p) for m in ("tiny", "gpt2-small", "1b")
    for p in ((1, 1, 1), (2, 1, 1), (4, 1, 1), (8, 1, 1), (1, 2, 1), (2, 2, 1), (4, 2, 1),
              (1, 1, 2), (2, 1, 2), (1, 2, 2), (2, 2, 2), (1, 1, 4))
]
_OUT_OF_DISTRIBUTION = [("7b", 4, 4, 1), ("7b", 8, 2, 1), ("7b", 2, 4, 2), ("13b", 4, 2, 2), ("13b", 2, 4, 2)]
_CATEGORIES = tuple(c for c in Bottleneck if c != Bottleneck.NONE)
_STEPS = 4
_SIZES = {"ms": (20.0, 80.0), "x": (2.0, 4.0), "MB": (64.0, 256.0)}


@dataclass(frozen=True, slots=True)
class Sample:
    """One planned trace: its id, split, family and job."""

    sample_id: str
    split: str
    family: tuple[str, int, int, int]
    config: SynthConfig


def _splits(seed: int) -> dict[tuple[str, int, int, int], str]:
    families = list(_IN_DISTRIBUTION)
    np.random.default_rng(seed).shuffle(families)
    n_val = n_test = max(1, round(0.15 * len(families)))
    cut = len(families) - n_val - n_test
    out = {f: "train" for f in families[:cut]}
    out.update({f: "val" for f in families[cut : cut + n_val]})
    out.update({f: "test" for f in families[cut + n_val :]})
    return out


def _injection(rng: np.random.Generator, family: tuple[str, int, int, int]) -> tuple[Injection, ...]:
    _, dp, tp, pp = family
    if rng.random() < 0.35:
        return ()
    choices = [c for c in _CATEGORIES if c != Bottleneck.PIPELINE_BUBBLE or pp > 1]
    category = choices[int(rng.integers(len(choices)))]
    ranks = dp * tp * pp
    unit = {"dataloader_stall": "ms", "straggler_rank": "ms", "host_pause": "ms", "host_sync": "ms",
            "pipeline_bubble": "ms", "slow_compute": "x", "launch_overhead": "x"}.get(category, "MB")
    lo, hi = _SIZES[unit]
    size = float(round(rng.uniform(lo, hi))) if unit != "x" else float(rng.integers(int(lo), int(hi) + 1))
    everyone = category == Bottleneck.EXPOSED_COMMUNICATION
    rank = () if everyone else (int(rng.integers(ranks)),)
    if category == Bottleneck.PIPELINE_BUBBLE:
        rank = ()  # the generator hits the first stage
    return (Injection(category.value, int(rng.integers(2, _STEPS + 1)), rank, size),)


def plan_dataset(n: int, seed: int = 0) -> list[Sample]:
    """The samples of an ``n``-trace corpus: about 10% out of distribution, the rest split by family.

    Raises:
        ConfigError: ``n`` is too small to fill every split.
    """
    if n < 8:
        raise ConfigError(f"dataset: need at least 8 samples to fill train/val/test/ood, got {n}")
    rng = np.random.default_rng(seed)
    split_of = _splits(seed)
    n_ood = max(2, n // 10)
    pool = list(_IN_DISTRIBUTION)
    samples = []
    for i in range(n):
        ood = i >= n - n_ood
        families = _OUT_OF_DISTRIBUTION if ood else pool
        family = families[(i * 7 + seed) % len(families)] if ood else families[int(rng.integers(len(families)))]
        model, dp, tp, pp = family
        micro = int(rng.choice([2, 4, 8])) if pp > 1 else int(rng.choice([1, 2]))
        config = SynthConfig(model=model, hardware=_HARDWARE[int(rng.integers(3))], dp=dp, tp=tp, pp=pp,
                             microbatches=micro, steps=_STEPS, seed=int(rng.integers(2**31)),
                             injections=_injection(rng, family), noise=0.02)
        split = "ood" if ood else split_of[family]
        samples.append(Sample(f"{i:05d}-{model}-dp{dp}tp{tp}pp{pp}", split, family, config))
    return samples


def _edits(config: SynthConfig) -> list[Edit]:
    edits = [Edit.scale(2.0, op="gemm"), Edit.scale(2.0, op="attention")]
    if config.dp > 1 or config.tp > 1:
        edits.append(Edit.scale(2.0, op="allreduce"))
    if config.injections:
        edits.append(Edit.remove_injection(0))
    return edits


def _whatif_json(config: SynthConfig) -> list[dict[str, object]]:
    return [whatif_to_json(whatif(config, edit)) for edit in _edits(config)]


def _build_one(item: tuple[Sample, Path]) -> str:
    sample, folder = item
    if (folder / _DONE).exists():
        return sample.sample_id
    synthesize(folder, sample.config, workers=1)
    write_whatif(folder, _whatif_json(sample.config))
    (folder / _DONE).write_text("")
    return sample.sample_id


def build_dataset(out_dir: Path, n: int, seed: int = 0, *, workers: int = 1,
                  progress: Callable[[int, int, str], None] | None = None,
                  samples: list[Sample] | None = None) -> list[dict[str, object]]:
    """Generates the corpus (resuming a partial one) and writes ``index.json``.

    Args:
        out_dir: the corpus folder; ``SPLIT/SAMPLE_ID/`` per sample.
        n: number of traces.
        seed: decides the plan, the split of families and every sample's noise.
        workers: processes generating samples in parallel.
        progress: called with (done, total, sample id) after each sample.
        samples: a plan to build instead of ``plan_dataset(n, seed)``.

    Returns:
        The index entries: id, split, family, path (relative) and config of every sample.
    """
    out_dir = Path(out_dir)
    samples = plan_dataset(n, seed) if samples is None else samples
    items = [(s, out_dir / s.split / s.sample_id) for s in samples]
    done = 0
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for sample_id in pool.map(_build_one, items):
                done += 1
                if progress:
                    progress(done, len(items), sample_id)
    else:
        for item in items:
            _build_one(item)
            done += 1
            if progress:
                progress(done, len(items), item[0].sample_id)
    index = [{"id": s.sample_id, "split": s.split, "family": list(s.family), "path": f"{s.split}/{s.sample_id}",
              "config": s.config.to_json()} for s in samples]
    (out_dir / INDEX_NAME).write_text(json.dumps({"seed": seed, "n": len(samples), "samples": index}, indent=1) + "\n")
    return index


def load_index(out_dir: Path) -> list[dict[str, object]]:
    """The samples of a built corpus.

    Raises:
        ConfigError: the folder holds no ``index.json`` (build it first).
    """
    path = Path(out_dir) / INDEX_NAME
    if not path.is_file():
        raise ConfigError(f"{out_dir}: no {INDEX_NAME}; build the corpus with `oracle dataset build`")
    return list(json.loads(path.read_text())["samples"])
