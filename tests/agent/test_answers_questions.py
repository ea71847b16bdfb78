"""The questions asked after "why is step N slow?", asked end to end on the shipped example (real
FalkorDB, offline planner): the right tool calls, and every number in the answer one a tool returned."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bottleneck_oracle.agent.answers_questions import answer_question
from bottleneck_oracle.agent.grounding import ungrounded
from bottleneck_oracle.agent.planner import Result


def _ask(conversation: Any, question: str, intent: str) -> tuple[Any, dict[str, dict[str, Any]]]:
    a = conversation.ask(question)
    assert a.intent == intent and a.answered, a.answer
    data = {r["name"]: r["data"] for r in a.extra["results"]}
    assert ungrounded(a.answer, [json.dumps(d) for d in data.values()]) == []
    return a, data


def _calls(a: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["args"]) for c in a.tool_calls]


def test_where_the_time_of_a_step_goes(conversation: Any) -> None:
    a, data = _ask(conversation, "Where does the time go in step 6 on rank 0?", "step_time")
    assert _calls(a) == [("explain_step", {"step": 6, "rank": 0})]
    e = data["explain_step"]
    assert a.verdict.startswith(f"Step 6 on rank 0 takes {e['wall_ms']} ms: cpu {e['breakdown_ms']['cpu']} ms")
    assert "This trace has no GPU events" in a.answer  # a CPU capture says what is missing


def test_how_busy_the_gpu_is_over_the_run(conversation: Any) -> None:
    a, data = _ask(conversation, "How busy is the GPU?", "gpu_busy")
    assert _calls(a) == [("job_bound", {})] and "no GPU events" in a.answer


def test_whether_the_job_is_host_or_communication_bound(conversation: Any) -> None:
    a, data = _ask(conversation, "Is the whole job bound by communication or by the host?", "job_bound")
    b = data["job_bound"]
    assert a.verdict == b["run"]["headline"]  # the run's verdict, as oracle analyze states it
    assert a.verdict.startswith(f"The run is {b['bound']}-bound over {len(b['steps'])} steady step(s)")
    assert "no GPU work in the trace" in a.verdict and b["slowest"]["step"] == 5 and b["slowest"]["slow"]
    assert "Step 5 ran abnormally long" in a.answer  # the slow step, a detail of the run's answer


@pytest.mark.parametrize(("question", "args"), [("What are the top kernels of step 5?", {"step": 5}),
                                                 ("Which ops take the most time over the whole run?", {})])
def test_the_top_ops(conversation: Any, question: str, args: dict[str, Any]) -> None:
    a, data = _ask(conversation, question, "top_ops")
    assert _calls(a) == [("top_ops", args)] and f"'{data['top_ops']['ops'][0]['op']}'" in a.verdict


def test_the_slowest_step(conversation: Any) -> None:
    a, data = _ask(conversation, "Which step is the slowest one?", "slowest_step")
    top = max(data["list_steps"]["steps"], key=lambda s: s["wall_ms"])
    assert a.verdict.startswith(f"Step {top['step']} is the slowest: {top['wall_ms']} ms") and top["step"] == 5


def test_a_rank_behaving_like_the_others(conversation: Any) -> None:
    a, data = _ask(conversation, "How much faster would step 5 be if rank 1 behaved like rank 0?", "rank_like_peers")
    p = data["rank_like_peers"]
    assert _calls(a) == [("rank_like_peers", {"rank": 1, "step": 5})]
    assert f"{p['gain_ms']} ms saved" in a.verdict and "fix host_pause" in a.answer and a.check


def test_what_a_change_saves_over_the_whole_run(conversation: Any) -> None:
    a, data = _ask(conversation, "How much would fixing the host pause save over the whole run?", "whatif_run")
    assert _calls(a) == [("whatif_run", {"edit": "fix host_pause"})]
    assert f"{data['whatif_run']['gain_ms']} ms over the whole run" in a.verdict


def test_what_a_finding_means(conversation: Any) -> None:
    a, _ = _ask(conversation, "What does straggler_rank mean?", "explain_category")
    assert _calls(a)[0] == ("playbook_search", {"query": "straggler_rank", "k": 2, "category": "straggler_rank"})
    assert a.verdict.startswith("straggler_rank means a late rank")


def test_a_faster_all_reduce_on_one_step(conversation: Any) -> None:
    a = conversation.ask("Would making the all-reduce twice as fast help step 3?")
    assert a.intent == "whatif" and _calls(a) == [("whatif", {"edit": "scale op=allreduce x2", "step": 3})]


def test_a_question_without_its_result_is_left_to_the_others() -> None:
    assert answer_question("top_ops", []) is None
    assert answer_question("whatif_run", [], no_change=True).verdict.startswith("Which change?")  # type: ignore[union-attr]
    unknown = answer_question("explain_category", [Result("playbook_search", {}, {"entries": []})])
    assert unknown is not None and "host_pause" in unknown.verdict  # names the categories it knows


@pytest.fixture(scope="module")
def untraced_conversation(untraced_settings: Any) -> Any:
    from bottleneck_oracle.agent.conversation import Conversation

    with Conversation(untraced_settings, trace="trace_compare_base") as c:
        yield c


def test_a_gpu_waiting_for_what_the_trace_does_not_show_is_said_not_blamed(untraced_conversation: Any) -> None:
    a, data = _ask(untraced_conversation, "Is the job host-bound or GPU-bound?", "job_bound")
    assert data["job_bound"]["bound"] == "untraced" and a.verdict.startswith("The trace cannot say what bounds the job")
    assert "host-bound" not in a.answer  # the GPU waited; the host did not hold it
    a, data = _ask(untraced_conversation, "Where does the time go in step 1010?", "step_time")
    wait = data["explain_step"]["untraced_wait"]
    assert f"Of the idle time, {wait['ms']} ms ({wait['pct']}% of the step) is GPU work that waited" in a.answer
    a = untraced_conversation.ask("Why is step 1010 slow?")
    data = {r["name"]: r["data"] for r in a.extra["results"]}
    assert ungrounded(a.answer, [json.dumps(d) for d in data.values()]) == []
    assert a.verdict.startswith(f"Step 1010 takes {data['explain_step']['wall_ms']} ms on rank 1, and {wait['ms']} ms")
    assert "I cannot say from this trace what it waited for" in a.verdict and "Profile a window" in a.answer
