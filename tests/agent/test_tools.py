"""The agent's tools on a real loaded trace (gpt_2rank in the session's embedded FalkorDB): typed
arguments, JSON results, errors as messages the agent can act on."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from langchain_core.tools import BaseTool

from bottleneck_oracle.agent.tools import MAX_RESULT_CHARS, TOOL_NAMES, ToolContext, _json, make_tools
from bottleneck_oracle.config import Settings


@pytest.fixture(scope="module")
def tools(agent_settings: Settings) -> Iterator[dict[str, BaseTool]]:
    ctx = ToolContext(agent_settings, trace="gpt_2rank")
    yield {t.name: t for t in make_tools(ctx)}
    ctx.close()


def _call(tools: dict[str, BaseTool], name: str, **args: object) -> dict:
    return json.loads(tools[name].invoke(args))


def test_every_tool_is_there_with_a_typed_schema(tools: dict[str, BaseTool]) -> None:
    assert tuple(tools) == TOOL_NAMES
    schema = tools["explain_step"].args_schema.model_json_schema()
    assert {"step", "rank", "trace"} <= set(schema["properties"])
    assert set(tools["compare_steps"].args_schema.model_json_schema()["required"]) == {"step_a", "step_b"}


def test_explain_step_names_the_cause_against_the_median(tools: dict[str, BaseTool]) -> None:
    e = _call(tools, "explain_step", step=5)
    assert (e["step"], e["rank"], e["slow"], e["wall_ms"]) == (5, 1, True, 179.484)
    assert e["median_ms"] < 40 and e["excess_ms"] > 140
    assert e["cause"]["category"] == "host_pause" and e["cause"]["ranks"] == [1]
    assert max(e["delta_ms"], key=lambda c: e["delta_ms"][c]) == "idle"
    assert all(not op["op"].startswith("ProfilerStep#") for op in e["top_ops"])


def test_a_normal_step_has_no_cause(tools: dict[str, BaseTool]) -> None:
    e = _call(tools, "explain_step", step=3)
    assert e["slow"] is False and e["cause"] is None


def test_a_step_that_does_not_exist_is_an_error_listing_the_steps(tools: dict[str, BaseTool]) -> None:
    e = _call(tools, "explain_step", step=42)
    assert "step 42" in e["error"] and "2, 3, 4, 5, 6, 7" in e["error"]
    assert "rank 9" in _call(tools, "explain_step", step=5, rank=9)["error"]


def test_stragglers_find_rank_1_late_in_step_5(tools: dict[str, BaseTool]) -> None:
    s = _call(tools, "stragglers", step=5)
    assert s["straggler"] == 1 and s["collectives"][0]["last_rank"] == 1 and s["collectives"][0]["late_ms"] > 100
    assert _call(tools, "stragglers", step=3)["straggler"] is None  # some rank is always last, by a little


def test_compare_steps_and_list_steps(tools: dict[str, BaseTool]) -> None:
    c = _call(tools, "compare_steps", step_a=3, step_b=5)
    assert c["delta_ms"] == round(c["wall_b_ms"] - c["wall_a_ms"], 3) and next(iter(c["breakdown_delta_ms"])) == "idle"
    steps = _call(tools, "list_steps")
    assert [s["step"] for s in steps["steps"]] == [2, 3, 4, 5, 6, 7]
    assert {(s["step"], s["rank"]) for s in steps["slow_steps"]} == {(5, 0), (5, 1)}


def test_critical_subgraph_is_condensed_within_its_budget(tools: dict[str, BaseTool]) -> None:
    small = _call(tools, "critical_subgraph", step=5, budget_tokens=300)
    large = _call(tools, "critical_subgraph", step=5, budget_tokens=4000)
    assert len(json.dumps(small)) < len(json.dumps(large)) and large["within_budget"]
    assert large["collectives"][0]["last_rank"] == 1


def test_whatif_and_optimize_predict_the_fix(tools: dict[str, BaseTool]) -> None:
    w = _call(tools, "whatif", edit="fix host_pause", step=5)
    assert w["gain_ms"] > 100 and w["chosen"] in w["predicted_ms"] and w["why"]
    assert "error" in _call(tools, "whatif", edit="make it faster")
    o = _call(tools, "optimize", step=5, budget=2)
    assert o["plan"] and o["plan"][0]["gain_ms"] > 100


def test_playbook_by_category_and_cypher_read_only(tools: dict[str, BaseTool]) -> None:
    p = _call(tools, "playbook_search", query="a rank paused", category="host_pause", k=2)
    assert p["entries"] and {e["category"] for e in p["entries"]} == {"host_pause"}
    rows = _call(tools, "cypher", query="MATCH (s:Step {trace: $trace}) RETURN count(s) AS n")
    assert rows["rows"] == [{"n": 12}]
    assert "error" in _call(tools, "cypher", query="MATCH (s:Step) DETACH DELETE s")
    assert _call(tools, "cypher", query="MATCH (s:Step {trace: $trace}) RETURN count(s) AS n")["rows"] == [{"n": 12}]


def test_a_result_too_large_keeps_every_key_and_its_first_items() -> None:
    """A straggler table of 600 collectives over the 12,000 characters a result may take: whole JSON, every
    key, the first (latest) arrivals kept in order, and how many went."""
    rows = [{"collective": i, "kind": "allreduce", "last_rank": i % 16, "late_ms": 600 - i} for i in range(600)]
    big = {"step": 3, "collectives": rows, "by_rank": [{"rank": r, "last_in": 1} for r in range(16)], "findings": []}
    text = _json(big)
    out = json.loads(text)
    assert len(text) <= MAX_RESULT_CHARS and set(out) == set(big) | {"collectives_omitted"}
    kept = out["collectives"]
    assert kept == rows[:len(kept)] and len(kept) + out["collectives_omitted"] == 600
    assert out["by_rank"] == big["by_rank"]  # the small list stays whole
    assert _json({"a": [1, 2]}) == json.dumps({"a": [1, 2]})  # a result that fits is untouched
