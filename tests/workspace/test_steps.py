"""Step questions answered from the graph database: real example trace, real synthetic runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb import GraphStore, open_store, stop_server
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.workspace import steps
from bottleneck_oracle.workspace.loaded import LoadedTrace, loaded_trace


@pytest.fixture(scope="module")
def store(agent_settings: Settings) -> Iterator[GraphStore]:
    with open_store(agent_settings, start=True) as s:
        yield s


@pytest.fixture(scope="module")
def gpt(store: GraphStore, agent_settings: Settings) -> LoadedTrace:
    return loaded_trace(store, "gpt_2rank", agent_settings)


def test_pick_step_defaults_to_the_slowest_slow_step_on_its_slowest_rank(store: GraphStore, gpt: LoadedTrace) -> None:
    assert steps.pick_step(store, gpt, None) == (5, 1)
    assert steps.pick_step(store, gpt, 3, 0) == (3, 0)
    with pytest.raises(ConfigError, match="its steps are 2, 3, 4, 5, 6, 7"):
        steps.pick_step(store, gpt, 1)


def test_explain_step_breakdown_sums_to_the_wall_time_and_cites_the_median(store: GraphStore, gpt: LoadedTrace) -> None:
    e = steps.explain_step(store, gpt, 5)
    assert sum(e["breakdown_ms"].values()) == pytest.approx(e["wall_ms"], abs=0.01)
    assert e["excess_ms"] == pytest.approx(e["wall_ms"] - e["median_ms"], abs=0.002)
    assert e["cause"]["category"] == "host_pause" and e["median_of_steps"] == 5


def test_list_steps_marks_the_slow_step(store: GraphStore, gpt: LoadedTrace) -> None:
    out = steps.list_steps(store, gpt)
    assert [s["step"] for s in out["steps"] if s["slow"]] == [5] and out["ranks"] == 2
    assert out["median_step_ms"] < 45


def test_compare_runs_finds_the_slower_hardware_with_confidence(tmp_path_factory: pytest.TempPathFactory) -> None:
    home = tmp_path_factory.mktemp("runs_home")  # its own workspace: the shared one keeps gpt_2rank the newest
    settings = Settings(home=home, workers=2)
    try:
        with open_store(settings, start=True) as store:
            _compare_runs(store, settings, tmp_path_factory)
    finally:
        stop_server(home)


def _compare_runs(store: GraphStore, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> None:
    runs = {}
    for hardware in ("H100", "A100"):
        folder = tmp_path_factory.mktemp(f"run_{hardware}")
        synthesize(folder, SynthConfig(model="gpt2-small", hardware=hardware, dp=2, steps=4))
        runs[hardware] = loaded_trace(store, Path(folder), settings)  # a path: ingested the first time
    out = steps.compare_runs(store, runs["H100"], runs["A100"])
    assert out["delta_ms"] > 0 and out["confidence"] == "high" and "slower" in out["verdict"]
    assert next(iter(out["category_delta_ms"])) == "gpu_compute"
    assert len(out["steps"]) == 4 and all(s["delta_ms"] > 0 for s in out["steps"])
    back = steps.compare_runs(store, runs["A100"], runs["H100"])
    assert back["delta_ms"] == -out["delta_ms"] and "faster" in back["verdict"]
