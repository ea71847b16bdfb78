"""The offline answers: templates filled with tool values only, so the grounding check passes."""

from __future__ import annotations

import json

from bottleneck_oracle.agent.answers import write_answer, write_reply
from bottleneck_oracle.agent.grounding import ungrounded
from bottleneck_oracle.agent.intents import read_slots
from bottleneck_oracle.agent.planner import Result

EXPLAINED = {"trace": "t", "step": 4, "rank": 0, "wall_ms": 80.25, "slow": True, "median_ms": 40.5,
             "excess_ms": 39.75, "delta_ms": {"data_loading": 39.0, "cpu": -0.5, "idle": 0.0},
             "findings": [{"category": "dataloader_stall", "step": 4, "ranks": [0], "ops": ["## load_batch ##"],
                           "impact_ms": 39.0, "severity": "major", "evidence": "rank 0 waited 39.0 ms for data"}],
             "cause": {"category": "dataloader_stall", "step": 4, "ranks": [0], "ops": ["## load_batch ##"],
                       "impact_ms": 39.0, "severity": "major", "evidence": "rank 0 waited 39.0 ms for data"}}
WHATIF = {"step": 4, "edits": ["fix dataloader_stall"], "baseline_ms": 80.25, "predicted_ms": {"replay": 41.25},
          "chosen": "replay", "best_ms": 41.25, "gain_ms": 39.0, "why": "no recorded score", "moved": {}}


def _answer(intent: str, question: str, *results: Result) -> str:
    text = write_answer(intent, read_slots(question), list(results))
    sources = [question] + [json.dumps(r.data) for r in results]
    assert ungrounded(text, sources) == []
    return text


def test_why_slow_answer_names_step_rank_ops_ms_median_and_fix() -> None:
    text = _answer("why_slow", "why is step 4 slow?", Result("explain_step", {}, EXPLAINED),
                   Result("whatif", {}, WHATIF),
                   Result("playbook_search", {}, {"entries": [{"title": "Prefetch", "remedy": "more workers",
                                                               "category": "dataloader_stall"}]}))
    for fact in ("Step 4", "80.25 ms", "rank 0", "40.5 ms", "dataloader_stall", "'## load_batch ##'", "41.25 ms",
                 "39.0 ms saved", "replay", "Prefetch"):
        assert fact in text


def test_a_step_without_cause_is_not_anomalous() -> None:
    normal = EXPLAINED | {"slow": False, "cause": None, "findings": []}
    assert "not anomalous" in _answer("why_slow", "why is step 4 slow?", Result("explain_step", {}, normal))
    assert "No step of trace t is anomalous" in _answer("why_slow", "why is it slow?",
                                                        Result("explain_step", {}, normal))


def test_errors_and_out_of_scope_say_so() -> None:
    assert _answer("why_slow", "q", Result("explain_step", {}, {"error": "step 9: no such step"})).startswith(
        "I cannot answer this: step 9")
    assert _answer("out_of_scope", "tell me a joke").startswith("I cannot answer that")
    assert "I cannot tell which change" in _answer("whatif", "what if it were better")


def test_why_slow_is_a_reply_in_the_contract() -> None:
    results = [Result("explain_step", {}, EXPLAINED), Result("whatif", {}, WHATIF),
               Result("playbook_search", {}, {"entries": [{"title": "Prefetch", "remedy": "more workers",
                                                           "category": "dataloader_stall"}]})]
    reply = write_reply("why_slow", read_slots("why is step 4 slow?"), results)
    assert reply.verdict == ("Step 4 is slow because of waiting for input data on rank 0: 80.25 ms on rank 0 "
                             "against a median step of 40.5 ms on that rank (39.75 ms more).")
    assert [e.tool for e in reply.evidence] == ["explain_step", "explain_step", "playbook_search"]
    assert reply.evidence[0].text.startswith(
        "The cause is dataloader_stall on rank(s) 0, culprit op(s) '## load_batch ##'")
    assert reply.action == ("`fix dataloader_stall` (Prefetch), predicted to bring step 4 to 41.25 ms from 80.25 ms, "
                            "39.0 ms saved (predictor: replay)")
    assert reply.confidence == "medium: only replay predicted it"
    assert reply.check is not None and reply.check.startswith("oracle whatif t --edit 'fix dataloader_stall' --step 4")
    lines = reply.render().splitlines()
    assert lines[0] == reply.verdict and lines[-2].startswith("Do: ") and lines[-1].startswith("Check: ")
    assert "offline planner" in reply.render(verbose=True) and "offline planner" not in reply.render()
    with_interval = [results[0], Result("whatif", {}, {**WHATIF, "interval_ms": [30.5, 60.125],
                                                      "interval_from": ["the replay's saving against 6 real re-runs"]}),
                     results[2]]
    action = write_reply("why_slow", read_slots("why is step 4 slow?"), with_interval).action
    assert action == ("`fix dataloader_stall` (Prefetch), predicted to bring step 4 to 41.25 ms from 80.25 ms "
                      "(interval 30.5 to 60.125 ms), 39.0 ms saved (predictor: replay)")


def test_the_ranks_that_waited_for_the_cause_are_in_the_verdict() -> None:
    cause = EXPLAINED["cause"] | {"rank": 0, "waited": [{"rank": 1, "ms": 38.5}]}
    text = _answer("why_slow", "why is step 4 slow?", Result("explain_step", {}, EXPLAINED | {"cause": cause}))
    verdict = text.splitlines()[0]
    assert "because of waiting for input data on rank 0:" in verdict and "rank(s) 1 waited in it (38.5 ms)" in verdict


def test_what_to_change_first_is_the_plans_first_edit_with_its_remedy_and_check() -> None:
    optimize = {"step": 5, "baseline_ms": 179.484, "plan": [
        {"edit": "fix host_pause step=5", "category": "host_pause", "predicted_ms": 32.947, "gain_ms": 146.537,
         "predictor": "replay"}], "candidates": [
        {"edit": "fix host_pause step=5", "category": "host_pause", "gain_ms": 146.537, "predictor": "replay",
         "confidence": None, "remedies": ["Stop garbage-collection pauses"]},
        {"edit": "scale op=allreduce x2", "category": "exposed_communication", "gain_ms": 1.5, "predictor": "gnn",
         "confidence": None, "remedies": []}]}
    reply = write_reply("optimize", read_slots("what should I change first?"),
                        [Result("optimize", {}, optimize), Result("list_steps", {}, {"trace": "gpt_2rank"})])
    assert reply.verdict.startswith("Change first on step 5: `fix host_pause step=5` (host_pause)")
    assert reply.action == ("Stop garbage-collection pauses: `fix host_pause step=5`, 146.537 ms saved "
                            "(predictor: replay)")
    assert reply.confidence == "medium: predicted by replay alone"
    assert reply.check is not None
    assert reply.check.startswith("oracle whatif gpt_2rank --edit 'fix host_pause' --step 5;")
    assert "`scale op=allreduce x2` (exposed_communication) 1.5 ms (gnn)" in reply.evidence[-1].text
    assert ungrounded(reply.render(), [json.dumps(optimize)]) == []


def test_a_slow_down_is_answered_as_its_cost_with_nothing_to_do() -> None:
    """'2x slower' reads as x0.5 (it read as x2, the opposite question), and a what-if that makes the step
    slower is a cost: no negative saving, no action recommending it."""
    question = "what if the all-reduce were 2x slower?"
    assert read_slots(question).factor == 0.5
    slower = WHATIF | {"edits": ["scale op=allreduce x0.5"], "predicted_ms": {"replay": 80.268}, "best_ms": 80.268,
                       "gain_ms": -0.018, "why": "a slow-down: replay"}
    text = _answer("whatif", question, Result("whatif", {}, slower))
    assert "0.018 ms slower" in text and "saved" not in text and "-0.018" not in text
    reply = write_reply("whatif", read_slots(question), [Result("whatif", {}, slower)])
    assert reply.action is None and reply.check is None


def test_a_stall_of_many_ranks_is_named_on_all_of_them_and_the_others_found_once_per_kind() -> None:
    """16 ranks stalled together in their data loader: the verdict names the rank on the critical path and
    the others with it; sixteen pipeline bubbles behind it are one entry with their range of impact."""
    stall = EXPLAINED["cause"] | {"ranks": [6, *range(6), *range(7, 16)]}
    bubbles = [{"category": "pipeline_bubble", "step": 4, "ranks": [r], "ops": ["SendRecv"], "impact_ms": 149.9 + r / 100,
                "severity": "major", "evidence": "the GPU idled"} for r in range(16)]
    explained = EXPLAINED | {"rank": 6, "cause": stall, "findings": [stall, *bubbles]}
    reply = write_reply("why_slow", read_slots("why is step 4 slow?"), [Result("explain_step", {}, explained)])
    assert "waiting for input data on rank 6 and on rank(s) 0-5, 7-15 with it" in reply.verdict
    (also,) = [e.text for e in reply.evidence if e.text.startswith("Also found")]
    assert also == "Also found: pipeline_bubble on rank(s) 0-15 (149.9 to 150.05 ms)."
    assert ungrounded(reply.verdict + also, [json.dumps(explained)]) == []
