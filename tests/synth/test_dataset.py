"""The corpus: split by configuration family, out-of-distribution held apart, resumable builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth import SynthConfig
from bottleneck_oracle.synth.dataset import (
    SPLITS,
    Sample,
    build_dataset,
    load_index,
    plan_dataset,
)
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.injection import parse_injection


def _ranks(s: Sample) -> int:
    return s.config.dp * s.config.tp * s.config.pp


def test_plan_splits_by_family_never_mixing_them() -> None:
    plan = plan_dataset(200, seed=3)
    assert {s.split for s in plan} == set(SPLITS)
    split_of: dict[tuple, set[str]] = {}
    for s in plan:
        split_of.setdefault(s.family, set()).add(s.split)
    assert all(len(v) == 1 for v in split_of.values())


def test_out_of_distribution_is_larger_than_anything_in_training() -> None:
    plan = plan_dataset(200, seed=3)
    train = [s for s in plan if s.split == "train"]
    ood = [s for s in plan if s.split == "ood"]
    assert len(ood) == 20
    params = {"tiny": 0, "gpt2-small": 1, "1b": 2, "7b": 3, "13b": 4}
    assert min(params[s.family[0]] for s in ood) > max(params[s.family[0]] for s in train)
    assert min(_ranks(s) for s in ood) > max(_ranks(s) for s in train)


def test_plan_is_deterministic_and_seed_dependent() -> None:
    assert plan_dataset(40, seed=1) == plan_dataset(40, seed=1)
    assert plan_dataset(40, seed=1) != plan_dataset(40, seed=2)


def test_plan_refuses_too_few_samples() -> None:
    with pytest.raises(ConfigError) as err:
        plan_dataset(3)
    assert "at least 8" in str(err.value)


def _tiny_plan() -> list[Sample]:
    straggler = (parse_injection("straggler_rank@3:1=30ms"),)
    return [
        Sample("a", "train", ("tiny", 2, 1, 1), SynthConfig(model="tiny", dp=2, steps=4, injections=straggler)),
        Sample("b", "test", ("tiny", 1, 1, 2), SynthConfig(model="tiny", pp=2, microbatches=2, steps=4)),
    ]


def test_build_writes_traces_truth_and_whatif_and_resumes(tmp_path: Path) -> None:
    seen: list[str] = []
    index = build_dataset(tmp_path, 2, samples=_tiny_plan(), progress=lambda d, n, sid: seen.append(sid))
    assert seen == ["a", "b"] and [e["split"] for e in load_index(tmp_path)] == ["train", "test"]
    folder = tmp_path / index[0]["path"]
    assert [r.rank for r in read_trace(folder).ranks] == [0, 1]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["ground_truth"][0]["category"] == "straggler_rank"
    whatif = json.loads((folder / "whatif.json").read_text())["edits"]
    removed = next(w for w in whatif if w["edit"]["kind"] == "remove_injection")
    slow = {(s, r): (before, after) for s, r, before, after in removed["step_ms"]}
    assert slow[(3, 1)][0] - slow[(3, 1)][1] == pytest.approx(30, abs=3)  # the stall's 30 ms come back
    stamp = (folder / "rank0.pt.trace.json.gz").stat().st_mtime_ns
    build_dataset(tmp_path, 2, samples=_tiny_plan())  # resumes: done samples are not rebuilt
    assert (folder / "rank0.pt.trace.json.gz").stat().st_mtime_ns == stamp


def test_load_index_without_a_build(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_index(tmp_path)
    assert "oracle dataset build" in str(err.value)
