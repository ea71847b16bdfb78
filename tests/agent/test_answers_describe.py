"""The describing answers in the contract: a verdict with the tool's number, evidence from that tool."""

from __future__ import annotations

import json

from bottleneck_oracle.agent.answers_describe import describe
from bottleneck_oracle.agent.grounding import ungrounded
from bottleneck_oracle.agent.planner import Result

STEPS = {"trace": "t", "steps": [{"step": 1}, {"step": 2}, {"step": 3}], "median_step_ms": 40.5,
         "slow_steps": [{"step": 3, "rank": 1, "wall_ms": 90.25, "median_ms": 40.5},
                        {"step": 3, "rank": 0, "wall_ms": 88.0, "median_ms": 41.0}], "gpu_bound_steps": []}


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


def test_no_result_of_the_intents_tool_is_no_answer() -> None:
    assert describe("straggler", [Result("list_steps", {}, STEPS)]) is None
    assert describe("nonsense", []) is None


def test_a_comparison_with_one_trace_loaded_names_it_and_states_no_count() -> None:
    listed = Result("list_traces", {}, {"traces": [{"name": "stall", "trace_id": "ab12", "ranks": 2,
                                                    "status": "complete"}]})
    reply = describe("compare_runs", [listed])
    assert reply is not None
    assert reply.verdict == "I need two loaded traces to compare runs; the database holds only 'stall'. " \
                            "Ingest the other run first."
    assert ungrounded(reply.render(), [json.dumps(listed.data)]) == []


def test_two_ranks_compared_name_where_their_paths_differ_and_the_steps_cause_elsewhere() -> None:
    pause = {"category": "host_pause", "step": 3, "ranks": [5], "impact_ms": 149.75, "severity": "major",
             "evidence": "rank 5 paused", "is_cause": True, "waited": [], "rank": 5}
    ranks = {"trace": "t", "step": 3, "rank_a": 3, "rank_b": 5, "wall_a_ms": 279.5, "wall_b_ms": 279.75,
             "delta_ms": 0.25, "breakdown_delta_ms": {"idle": 150.0, "communication": -149.75, "cpu": 0.0},
             "gpu_a": {"busy_pct": 99.25}, "gpu_b": {"busy_pct": 45.75}, "cause": pause,
             "findings_a": [], "findings_b": [pause]}
    text = _grounded("compare_ranks", Result("compare_ranks", {}, ranks))
    assert text.startswith("In step 3, rank 5 took 279.75 ms against 279.5 ms on rank 3 (0.25 ms).")
    assert "idle +150.0 ms; communication -149.75 ms" in text and "45.75% on rank 5, 99.25% on rank 3" in text
    assert "On rank 5: host_pause (149.75 ms, the cause of the step)" in text and "neither" not in text
    elsewhere = ranks | {"rank_b": 4, "findings_b": []}
    assert "The cause of step 3 is host_pause on rank 5, neither of these two." in _grounded(
        "compare_ranks", Result("compare_ranks", {}, elsewhere))
    assert describe("compare_ranks", []).verdict.startswith("I cannot tell which ranks to compare")  # none named
