"""Conversations on the shipped example with the offline backend: the answer's JSON shape, the
cause and suggestions taken from the tools, questions it cannot answer, and sessions that resume."""

from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.agent.conversation import Answer, Conversation
from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import open_store
from bottleneck_oracle.workspace.loaded import loaded_trace
from bottleneck_oracle.workspace.steps import explain_step
from tests.agent.conftest import BERT, QWEN
from tests.conftest import STRAGGLERS

ASK_KEYS = {"answer", "answered", "step", "cause", "evidence", "suggestions", "tool_calls", "llm", "grounded",
            "ungrounded_numbers", "verdict", "action", "confidence", "check", "details"}


def test_why_is_step_5_slow_names_rank_ops_ms_median_and_the_fix(conversation: Conversation) -> None:
    a = conversation.ask("Why is step 5 slow?")
    out = a.to_json()
    assert ASK_KEYS <= set(out) and out["answered"] and out["grounded"] and out["ungrounded_numbers"] == []
    assert out["step"] == 5 and out["cause"]["category"] == "host_pause" and out["cause"]["ranks"] == [1]
    assert out["cause"]["ops"] and out["cause"]["ops"][0] in a.answer
    for fact in ("179.484 ms", "rank 1", "median step of 32.948 ms", "host_pause"):
        assert fact in a.answer
    s = out["suggestions"][0]
    assert s["edit"] == "fix host_pause" and s["gain_ms"] > 100 and s["predictor"]
    assert f"{s['predicted_ms']} ms" in a.answer
    # the contract: the verdict with its number first, evidence from named tools, Do and Check
    assert a.answer.splitlines()[0] == out["verdict"] and out["verdict"].startswith("Step 5 is slow because of")
    assert "179.484 ms" in out["verdict"] and 1 <= len(out["evidence"]) <= 5
    assert {e["tool"] for e in out["evidence"]} <= {"explain_step", "playbook_search"}
    assert f"{s['gain_ms']} ms saved" in out["action"] and out["confidence"].startswith(("high", "medium"))
    assert out["check"].startswith("oracle whatif gpt_2rank --edit 'fix host_pause' --step 5")
    assert a.answer.splitlines()[-1] == f"Check: {out['check']}" and len(a.answer.splitlines()) <= 8
    assert any("offline planner" in d for d in out["details"]) and "offline planner" in a.render(verbose=True)
    assert [c["name"] for c in out["tool_calls"]] == ["explain_step", "whatif", "playbook_search"]
    assert all(c["ok"] and c["ms"] is not None for c in out["tool_calls"])


def test_what_should_i_change_first_gives_ranked_remedies(conversation: Conversation) -> None:
    a = conversation.ask("What should I change first?")
    assert a.answered and a.grounded and a.suggestions[0]["edit"].startswith("fix host_pause")
    assert a.suggestions[0]["remedy"] and f"{a.suggestions[0]['gain_ms']} ms saved" in a.answer


def test_a_step_that_does_not_exist_is_not_answered_and_lists_the_steps(conversation: Conversation) -> None:
    a = conversation.ask("why is step 42 slow?")
    assert not a.answered and "2, 3, 4, 5, 6, 7" in a.reason and "2, 3, 4, 5, 6, 7" in a.answer


def test_an_out_of_scope_question_says_what_it_can_answer(conversation: Conversation) -> None:
    a = conversation.ask("what is the capital of Peru?")
    assert not a.answered and a.tool_calls == [] and "why a step is slow" in a.answer


def test_a_normal_step_is_said_to_be_normal(conversation: Conversation) -> None:
    a = conversation.ask("why is step 3 slow?")
    assert a.answered and a.cause["category"] == "none" and "not anomalous" in a.answer


def test_a_session_resumes_from_the_workspace(agent_settings: Settings) -> None:
    with Conversation(agent_settings, session="resume-test") as first:
        first.ask("which steps are slow?")
    with Conversation(agent_settings, session="resume-test") as again:
        assert [q for q, _ in again.history()] == ["which steps are slow?"]
        again.reset()
        assert again.history() == []


def test_why_is_a_gpu_bound_step_slow_says_gpu_bound_with_the_tools_numbers(gpu_settings: Settings) -> None:
    with Conversation(gpu_settings, trace=str(QWEN)) as c:
        a = c.ask("Why is step 6 slow?")
        explained = next(t for t in a.to_json()["tool_calls"] if t["name"] == "explain_step")
        with open_store(gpu_settings) as store:
            e = explain_step(store, loaded_trace(store, QWEN, gpu_settings), 6)
    bound = e["gpu_bound"]
    assert a.grounded and a.ungrounded_numbers == [] and explained["ok"]
    assert a.answer.startswith("Step 6 is GPU-bound on rank 0")
    assert f"{bound['busy_pct']}%" in a.answer and f"{bound['busy_ms']} of {e['wall_ms']} ms" in a.answer
    for c in bound["op_classes"][:3]:
        assert f"{c['class']} {c['ms']} ms" in a.answer


def test_how_busy_was_the_gpu_is_answered_from_the_timeline(gpu_settings: Settings) -> None:
    with Conversation(gpu_settings, trace=str(BERT)) as c:
        a = c.ask("How busy was the GPU in step 6?")
        with open_store(gpu_settings) as store:
            gpu = explain_step(store, loaded_trace(store, BERT, gpu_settings), 6)["gpu"]
    assert a.grounded and f"busy {gpu['busy_ms']} ms ({gpu['busy_pct']}%)" in a.answer
    assert f"idle {gpu['idle_ms']} ms" in a.answer and "not GPU-bound" in a.answer


def test_a_gpu_question_on_a_trace_without_gpu_events_says_it_cannot_tell(conversation: Conversation) -> None:
    a = conversation.ask("How busy was the GPU in step 5?")
    assert a.grounded and a.answer.startswith("This trace has no GPU events: I cannot say how busy the GPU was.")


def _called(a: Answer) -> list[tuple[str, dict]]:
    return [(c["name"], c["args"]) for c in a.tool_calls if c["name"] != "playbook_search"]


def test_follow_ups_refer_to_the_earlier_turns(agent_settings: Settings) -> None:
    with Conversation(agent_settings, trace="gpt_2rank") as c:
        why = c.ask("Why is step 5 slow?")
        on_rank = c.ask("and on rank 0?")
        step6 = c.ask("what about step 6?")
        c.ask("Why is step 5 slow?")
        do = c.ask("What should I do about it?")
        save = c.ask("How much would that save?")
    assert _called(on_rank)[0] == ("explain_step", {"step": 5, "rank": 0}) and on_rank.intent == "why_slow"
    assert "on rank 0 against a median step" in on_rank.verdict and on_rank.cause == why.cause
    assert _called(step6)[0] == ("explain_step", {"step": 6, "rank": 0}) and step6.step == 6 and step6.answered
    assert [name for name, _ in _called(step6)[1:]] in ([], ["job_bound"])  # a step like the others: the run's verdict
    # what to do about the cause: the ranked fixes of that step, its first the cause's fix
    assert _called(do) == [("optimize", {"step": 5, "budget": 1})] and do.intent == "optimize"
    first = do.suggestions[0]
    assert first["edit"].startswith("fix host_pause") and do.answered and do.grounded
    assert do.verdict.startswith("Change first on step 5") and f"{first['gain_ms']} ms saved" in do.answer
    # what that saves: the what-if of that edit on that step, the same saving the plan predicted
    assert _called(save) == [("whatif", {"edit": "fix host_pause", "step": 5})] and save.intent == "whatif"
    assert save.suggestions[0]["gain_ms"] == first["gain_ms"] == why.suggestions[0]["gain_ms"]
    assert save.grounded and save.verdict.startswith("With `fix host_pause`, step 5 is predicted to take")
    assert save.check is not None and save.check.startswith("oracle whatif gpt_2rank --edit 'fix host_pause' --step 5")


def test_a_pipeline_job_alone_answers_its_straggler_questions_and_follow_ups(tmp_path: Path) -> None:
    """With a pipeline job's op table and no trace, a rank's what-if and the job's slowness are its straggler
    analysis (on a trace they would be rank_like_peers and why_slow), and no graph database starts."""
    with Conversation(Settings(home=tmp_path, workers=2), pipeline=str(STRAGGLERS / "AR")) as c:
        who = c.ask("which workers hold this job back?")
        healthy = c.ask("what if rank 0 were healthy?")
        again = c.ask("and on rank 4?")
        why = c.ask("why is the job slow?")
    assert [a.intent for a in (who, healthy, again, why)] == ["stragglers"] * 4
    assert all(a.grounded and a.answered for a in (who, healthy, again, why))
    assert _called(healthy) == [("straggler_report", {"whatif": ["fix straggler_rank rank=0"]})]
    assert _called(again) == [("straggler_report", {"whatif": ["fix straggler_rank rank=4"]})]
    assert "rank 0 (dp_rank 0, stage 0)" in who.verdict and "S = 1.973" in who.verdict
    assert not (tmp_path / "falkordb").exists()
