"""The describing answers in the contract: a verdict with the tool's number, evidence from that tool."""

from __future__ import annotations

import json

from bottleneck_oracle.agent.answers_describe import describe
from bottleneck_oracle.agent.grounding import ungrounded
from bottleneck_oracle.agent.planner import Result

STEPS = {"trace": "t", "steps": [{"step": 1}, {"step": 2}, {"step": 3}], "median_step_ms": 40.5,
         "slow_steps": [{"step": 3, "rank": 1, "wall_ms": 90.25, "median_ms": 40.5},
                        {"step": 3, "rank": 0, "wall_ms": 88.0, "median_ms": 41.0}], "gpu_bound_steps": []}
RUNS = {"verdict": "b is slower than a", "base": "a", "other": "b", "base_median_ms": 40.0, "other_median_ms": 55.5,
        "delta_ms": 15.5, "delta_pct": 38.75, "confidence": "high", "spread_ms": 1.25,
        "category_delta_ms": {"data_loading": 15.0}, "op_class_delta_ms": {"gemm": 0.5}}


def _grounded(intent: str, result: Result) -> str:
    reply = describe(intent, [result])
    assert reply is not None
    text = reply.render()
    assert ungrounded(text, [json.dumps(result.data)]) == [] and all(e.tool == result.name for e in reply.evidence)
    return text


def test_the_steps_verdict_names_the_slow_steps_once_each_with_its_numbers() -> None:
    lines = _grounded("list_steps", Result("list_steps", {}, STEPS)).splitlines()
    assert lines[0] == "Trace t: 3 steps, median step 40.5 ms; slow: step(s) 3."
    assert lines[1] == "- Slow: step 3 on rank 1 (90.25 ms, median 40.5 ms). [list_steps]"


def test_two_runs_compared_carry_the_tools_confidence() -> None:
    reply = describe("compare_runs", [Result("compare_runs", {}, RUNS)])
    assert reply is not None and reply.verdict.startswith("b is slower than a: median step 55.5 ms for b")
    assert reply.confidence == "Confidence high: the spread of the steps is 1.25 ms."
    assert "data_loading +15.0 ms" in reply.evidence[0].text


def test_no_result_of_the_intents_tool_is_no_answer() -> None:
    assert describe("straggler", [Result("list_steps", {}, STEPS)]) is None
    assert describe("nonsense", []) is None
