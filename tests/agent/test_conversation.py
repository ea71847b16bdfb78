"""Conversations on the shipped example with the offline backend: the answer's JSON shape, the
cause and suggestions taken from the tools, questions it cannot answer, and sessions that resume."""

from __future__ import annotations

from bottleneck_oracle.agent.conversation import Conversation
from bottleneck_oracle.config import Settings

ASK_KEYS = {"answer", "answered", "step", "cause", "evidence", "suggestions", "tool_calls", "llm", "grounded",
            "ungrounded_numbers"}


def test_why_is_step_5_slow_names_rank_ops_ms_median_and_the_fix(conversation: Conversation) -> None:
    a = conversation.ask("Why is step 5 slow?")
    out = a.to_json()
    assert ASK_KEYS <= set(out) and out["answered"] and out["grounded"] and out["ungrounded_numbers"] == []
    assert out["step"] == 5 and out["cause"]["category"] == "host_pause" and out["cause"]["ranks"] == [1]
    assert out["cause"]["ops"] and out["cause"]["ops"][0] in a.answer
    for fact in ("179.484 ms", "rank 1", "median step of 32.948 ms", "host_pause", "offline planner"):
        assert fact in a.answer
    s = out["suggestions"][0]
    assert s["edit"] == "fix host_pause" and s["gain_ms"] > 100 and s["predictor"]
    assert f"{s['predicted_ms']} ms" in a.answer
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
