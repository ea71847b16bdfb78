"""The offline planner speaks LangChain's chat-model interface: tool calls first, then an answer
written from this turn's tool results only."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from bottleneck_oracle.agent.offline import REPAIR_NAME, OfflinePlanner, turn, turn_results


def test_it_asks_for_tools_then_answers_from_their_results() -> None:
    model = OfflinePlanner().bind_tools([])
    first = model.invoke([HumanMessage("what is on the critical path of step 5?")])
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [("critical_subgraph", {"step": 5})]
    assert first.response_metadata["intent"] == "critical_path"
    result = ToolMessage(json.dumps({"error": "step 5: trace t has no such complete step; its steps are 1, 2"}),
                         tool_call_id=first.tool_calls[0]["id"])
    answer = model.invoke([HumanMessage("what is on the critical path of step 5?"), first, result])
    assert not answer.tool_calls and answer.content.startswith("I cannot answer this: step 5")
    reply = answer.response_metadata["reply"]  # the contract's fields travel with the short answer
    assert reply["verdict"] == answer.content and "its steps are 1, 2" in reply["verdict"]
    assert any("offline planner: intent 'critical_path'" in d for d in reply["details"])


def test_the_turn_starts_at_the_last_question_not_at_the_grounding_check() -> None:
    messages = [HumanMessage("old question"), AIMessage("old answer"), HumanMessage("why is step 3 slow?"),
                AIMessage("x"), HumanMessage("repair", name=REPAIR_NAME)]
    question, after = turn(messages)
    assert question == "why is step 3 slow?" and len(after) == 2


def test_tool_results_pair_with_their_calls() -> None:
    call = AIMessage("", tool_calls=[{"name": "list_steps", "args": {"trace": "a"}, "id": "c1", "type": "tool_call"}])
    results = turn_results([call, ToolMessage('{"steps": []}', tool_call_id="c1"), ToolMessage("x", tool_call_id="zz")])
    assert [(r.name, r.args, r.data, r.ok) for r in results] == [("list_steps", {"trace": "a"}, {"steps": []}, True)]


def test_only_bound_tools_are_called() -> None:
    model = OfflinePlanner().bind_tools([])
    bound = OfflinePlanner().bind(tool_names=["list_steps"])
    assert model.invoke([HumanMessage("why is step 5 slow?")]).tool_calls
    assert not bound.invoke([HumanMessage("why is step 5 slow?")]).tool_calls  # explain_step is not offered


def test_a_pipeline_job_alone_reads_a_ranks_what_if_as_its_straggler_report() -> None:
    question = [HumanMessage("what if rank 37 were healthy?")]
    on_trace = OfflinePlanner().bind_tools([]).invoke(question)
    on_job = OfflinePlanner(pipeline_job=True).bind_tools([]).invoke(question)
    assert [c["name"] for c in on_trace.tool_calls] == ["rank_like_peers"]  # on a trace: that rank like its peers
    assert on_job.response_metadata["intent"] == "stragglers"
    assert [(c["name"], c["args"]) for c in on_job.tool_calls] == [
        ("straggler_report", {"whatif": ["fix straggler_rank rank=37"]})]
    listed = OfflinePlanner(pipeline_job=True).bind_tools([]).invoke([HumanMessage("which traces are loaded?")])
    assert listed.response_metadata["intent"] == "list_traces"  # a question only a trace answers stays its own
