"""Context assembly: the straggling step of a real capture condensed within a token budget."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from bottleneck_oracle.graph.types import CATEGORIES
from bottleneck_oracle.retrieval import Subgraph, condense, critical_subgraph, estimate_tokens
from tests.retrieval.conftest import Memory


@pytest.fixture(scope="module")
def step5(memory: Memory) -> Subgraph:
    return critical_subgraph(memory.store, memory.gpt.report.trace_id, 5, 1, hops=1)


def _size(ctx: dict[str, object]) -> int:
    return len(json.dumps(ctx, separators=(",", ":")))


def test_condense_reports_the_straggler_and_the_idle_time(step5: Subgraph) -> None:
    ctx = condense(step5)
    assert ctx["within_budget"] and ctx["tokens"] == math.ceil(_size(ctx) / 4) <= 1500
    assert ctx["dropped"] == {"ops": 0, "op_classes": 0, "collectives": 0, "findings": 0}
    late = ctx["collectives"][0]
    assert late["last_rank"] == 1 and late["late_ms"] == pytest.approx(150.148, abs=1e-3)
    assert late["kind"] == "allreduce" and late["members"] == 2
    assert set(ctx["attribution"]) == {c.value for c in CATEGORIES}
    idle = ctx["attribution"]["idle"]
    assert idle["ms"] == pytest.approx(154.255, abs=1e-3) and idle["median_ms"] < 5
    assert ctx["wall_ms"] == pytest.approx(179.484, abs=1e-3) and ctx["median_wall_ms"] < 50
    assert {f["category"] for f in ctx["findings"]} == {"host_pause", "straggler_rank"}
    classes = [g["op_class"] for g in ctx["path"]]
    assert classes[0] == "annotation" and "gemm" in classes  # ProfilerStep#5 holds the pause
    assert [g["ms"] for g in ctx["path"]] == sorted((g["ms"] for g in ctx["path"]), reverse=True)
    assert ctx["subgraph"]["nodes"] == len(step5.nodes) and sum(ctx["subgraph"]["edges"].values()) == len(step5.edges)
    json.dumps(ctx)  # JSON-ready


def test_a_smaller_budget_gives_a_smaller_context_that_says_what_it_dropped(step5: Subgraph) -> None:
    full, small, tiny = condense(step5, 1500), condense(step5, 400), condense(step5, 10)
    assert _size(small) < _size(full) and small["tokens"] <= 400 and small["within_budget"]
    assert sum(small["dropped"].values()) > 0 and small["dropped"]["ops"] > 0
    kept = sum(len(g["ops"]) for g in small["path"])
    assert kept + small["dropped"]["ops"] == sum(len(g["ops"]) for g in full["path"])
    assert small["collectives"][0]["late_ms"] == full["collectives"][0]["late_ms"]  # the straggler outlasts ops
    assert not tiny["within_budget"] and tiny["tokens"] > 10 and tiny["findings"] == []
    assert tiny["attribution"] == full["attribution"]  # the header stays
    with pytest.raises(ValueError):
        condense(step5, 0)


def test_estimate_tokens_is_a_quarter_of_the_json() -> None:
    assert estimate_tokens({"a": 1}) == math.ceil(len('{"a":1}') / 4)


def test_a_step_of_many_ranks_keeps_its_path_over_hundreds_of_collectives_and_findings(step5: Subgraph) -> None:
    """The real step with its collectives and findings repeated as a 64-rank job has them (rank by rank): the
    path's op classes stay, with the latest collectives and the largest findings. Before, every op class went
    first and the answer read 'mostly no op (0.0 ms)'; and the fit re-measured the context once per item."""
    many = replace(step5,
                   collectives=tuple({**c, "instance": 1000 * k + c["instance"], "lateness_us": c["lateness_us"] - k}
                                     for k in range(300) for c in step5.collectives),
                   findings=tuple({**f, "ranks": [k], "impact_ms": f["impact_ms"] - k / 1000}
                                  for k in range(64) for f in step5.findings))
    full, ctx = condense(step5), condense(many)
    assert ctx["within_budget"] and ctx["path"] and ctx["path"][0]["op_class"] == full["path"][0]["op_class"]
    assert ctx["collectives"][0]["late_ms"] == full["collectives"][0]["late_ms"]
    assert max(f["impact_ms"] for f in ctx["findings"]) == max(f["impact_ms"] for f in full["findings"])
    assert ctx["dropped"]["collectives"] >= 290 and ctx["dropped"]["findings"] > 0
