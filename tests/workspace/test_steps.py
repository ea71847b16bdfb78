"""Step questions answered from the graph database: the real example trace and H100 traces (two runs are
compared by ``workspace/diff.py``: tests/workspace/test_diff.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.graphdb import GraphStore, open_store
from bottleneck_oracle.workspace import steps
from bottleneck_oracle.workspace.loaded import LoadedTrace, loaded_trace
from tests.agent.conftest import BERT, QWEN


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


def test_explain_step_names_the_rank_that_delayed_the_step_and_who_waited(store: GraphStore, gpt: LoadedTrace) -> None:
    e = steps.explain_step(store, gpt, 5)
    cause = e["cause"]
    assert cause["is_cause"] and cause["category"] == "host_pause" and cause["rank"] == 1 == e["rank"]
    (waited,) = cause["waited"]  # rank 0 waited inside the all-reduce for rank 1's pause
    assert waited["rank"] == 0 and waited["ms"] > 100
    assert steps.explain_step(store, gpt, 5, 0)["rank"] == 0  # a rank asked is the rank explained


def test_compare_ranks_finds_the_step_where_they_differ_and_names_the_cause(store: GraphStore, gpt: LoadedTrace) -> None:
    c = steps.compare_ranks(store, gpt, 1)  # no step, no reference: rank 0, where rank 1 paused
    assert (c["step"], c["rank_b"], c["rank_a"]) == (5, 1, 0)
    assert c["delta_ms"] == pytest.approx(c["wall_b_ms"] - c["wall_a_ms"], abs=0.002)
    assert next(iter(c["breakdown_delta_ms"])) == "idle" and c["breakdown_delta_ms"]["idle"] > 100
    assert [f["category"] for f in c["findings_b"] if f["is_cause"]] == ["host_pause"] and c["cause"]["rank"] == 1
    assert steps.compare_ranks(store, gpt, 0, 1, step=3)["step"] == 3
    with pytest.raises(NotFoundError, match="^rank 7: trace gpt_2rank has ranks 0, 1$"):
        steps.compare_ranks(store, gpt, 7)


def test_compare_steps_leaves_out_the_steps_own_ranges(store: GraphStore, gpt: LoadedTrace) -> None:
    """ProfilerStep#5 and ProfilerStep#4 are named for their steps: the whole of each read as an op that
    appeared (+ its wall time) and one that went."""
    c = steps.compare_steps(store, gpt, 4, 5)
    assert c["ops"] and not [o for o in c["ops"] if o["op"].startswith("ProfilerStep#")]


def test_list_steps_marks_the_slow_step(store: GraphStore, gpt: LoadedTrace) -> None:
    out = steps.list_steps(store, gpt)
    assert [s["step"] for s in out["steps"] if s["slow"]] == [5] and out["ranks"] == 2
    assert out["median_step_ms"] < 45


@pytest.fixture(scope="module")
def gpu_store(gpu_settings: Settings) -> Iterator[GraphStore]:
    with open_store(gpu_settings, start=True) as s:
        yield s


def test_explain_step_of_a_gpu_bound_step_gives_its_gpu_record_and_verdict(gpu_store: GraphStore,
                                                                          gpu_settings: Settings) -> None:
    qwen = loaded_trace(gpu_store, QWEN, gpu_settings)
    e = steps.explain_step(gpu_store, qwen)
    gpu, bound = e["gpu"], e["gpu_bound"]
    assert e["has_gpu"] and (e["step"], e["rank"]) == (6, 0)
    assert gpu["busy_ms"] + gpu["idle_ms"] == pytest.approx(e["wall_ms"], abs=2e-3)
    assert gpu["computation_ms"] <= gpu["busy_ms"] and gpu["comm_ms"] == 0  # one GPU, no collectives
    assert gpu["busy_pct"] == pytest.approx(100 * gpu["busy_ms"] / e["wall_ms"], abs=0.06) and gpu["busy_pct"] >= 75
    assert bound["busy_pct"] == gpu["busy_pct"] and "GPU-bound" in bound["evidence"]
    classes = [c["class"] for c in bound["op_classes"]]
    assert {"gemm", "attention", "elementwise"} <= set(classes)  # a transformer's kernels
    assert sum(c["ms"] for c in bound["op_classes"]) <= gpu["busy_ms"] + 1e-3
    listed = steps.list_steps(gpu_store, qwen)
    assert listed["has_gpu"] and listed["gpu_bound_steps"] == [{"step": 6, "rank": 0, "busy_pct": gpu["busy_pct"]}]
    assert listed["steps"][0]["gpu"] == gpu and listed["steps"][0]["gpu_bound"]
    (row,) = steps.step_rows(gpu_store, qwen)
    assert row["gpu"] == gpu and row["gpu_bound"]


def test_a_host_bound_step_has_a_gpu_record_and_no_verdict(gpu_store: GraphStore, gpu_settings: Settings) -> None:
    bert = loaded_trace(gpu_store, BERT, gpu_settings)
    e = steps.explain_step(gpu_store, bert)
    assert e["gpu"]["busy_pct"] < 75 and e["gpu"]["idle_ms"] > e["gpu"]["busy_ms"] and e["gpu_bound"] is None
    assert steps.list_steps(gpu_store, bert)["gpu_bound_steps"] == []


def test_a_trace_without_gpu_events_says_so(store: GraphStore, gpt: LoadedTrace) -> None:
    e = steps.explain_step(store, gpt, 5)
    assert e["gpu"] is None and e["gpu_bound"] is None and e["has_gpu"] is False
    listed = steps.list_steps(store, gpt)
    assert listed["has_gpu"] is False and all(s["gpu"] is None for s in listed["steps"])
