"""The agent's tools on a real loaded trace (gpt_2rank in the session's embedded FalkorDB): typed
arguments, JSON results, errors as messages the agent can act on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool

from bottleneck_oracle.agent.tools import MAX_RESULT_CHARS, TOOL_NAMES, TOP_WORKERS, ToolContext, _json, make_tools
from bottleneck_oracle.config import Settings
from tests.conftest import STRAGGLERS


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


def test_straggler_report_keeps_the_slowest_workers_and_needs_a_job(tmp_path: Path) -> None:
    """A 64-worker job's report for the model: every key the answer reads, the workers cut to the slowest few, well
    under the result's limit; no job given is an error saying what to pass."""
    ctx = ToolContext(Settings(home=tmp_path, workers=2), pipeline=str(STRAGGLERS / "SE"))
    tool = next(t for t in make_tools(ctx) if t.name == "straggler_report")
    text = tool.invoke({})
    r = json.loads(text)
    assert len(text) < MAX_RESULT_CHARS and r["pipeline"] == str(STRAGGLERS / "SE")
    assert r["cause"] == "uneven_microbatches" and r["secondary_cause"] is None  # moving layers keeps the spread
    assert len(r["by_worker"]) == TOP_WORKERS and r["by_worker_omitted"] == 64 - TOP_WORKERS
    assert list(r["by_worker"].values())[0]["slowdown"] >= list(r["by_worker"].values())[-1]["slowdown"]
    assert {"headline", "fixes", "whatif", "shares", "by_stage", "by_op_type", "step_time_s"} <= set(r)
    assert not {"step_times_s", "step_slowdown", "heatmap"} & set(r)
    bad = json.loads(tool.invoke({"whatif": ["fix straggler_rank rank=999"]}))
    assert "rank 999 records no ops" in bad["error"]
    alone = next(t for t in make_tools(ToolContext(Settings(home=tmp_path, workers=2))) if t.name == "straggler_report")
    assert json.loads(alone.invoke({}))["error"].startswith("no pipeline job given: pass --pipeline PATH")
    assert not (tmp_path / "falkordb").exists()  # an op table needs no graph database
