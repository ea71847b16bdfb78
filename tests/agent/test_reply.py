"""The answer contract's rendering: verdict first, at most five evidence lines by default, Do and Check."""

from bottleneck_oracle.agent.reply import MAX_EVIDENCE, Evidence, Reply, parse_reply


def test_a_reply_renders_verdict_evidence_action_and_check_in_order() -> None:
    reply = Reply("Step 5 is slow: rank 1 paused 150.0 ms.",
                  [Evidence(f"line {i}", "explain_step") for i in range(7)],
                  action="fix host_pause: 179.5 -> 32.9 ms", confidence="high",
                  check="oracle whatif 'fix host_pause' --step 5", details=["everything else"])
    lines = reply.render().splitlines()
    assert lines[0] == "Step 5 is slow: rank 1 paused 150.0 ms."
    assert lines[1:1 + MAX_EVIDENCE] == [f"- line {i} [explain_step]" for i in range(MAX_EVIDENCE)]
    assert lines[-2] == "Do: fix host_pause: 179.5 -> 32.9 ms (confidence: high)"
    assert lines[-1] == "Check: oracle whatif 'fix host_pause' --step 5"
    verbose = reply.render(verbose=True).splitlines()
    assert "- line 6 [explain_step]" in verbose and verbose[-1] == "everything else"


def test_a_reply_without_action_is_the_verdict_and_its_evidence() -> None:
    reply = Reply("This trace has no GPU events: I cannot say how busy the GPU was.")
    assert reply.render() == "This trace has no GPU events: I cannot say how busy the GPU was."
    assert reply.to_json() == {"verdict": reply.verdict, "evidence": [], "action": None, "confidence": None,
                               "check": None}


def test_a_written_answer_reads_back_into_the_contract() -> None:
    reply = Reply("Step 5 is slow: rank 1 paused 150.0 ms.", [Evidence("idle +153.454 ms", "explain_step")],
                  action="`fix host_pause`: 146.537 ms saved", confidence="high: replay",
                  check="oracle whatif gpt_2rank --edit 'fix host_pause' --step 5")
    assert parse_reply(reply.render()) == reply
    loose = parse_reply("Step 5 took 179.484 ms.\nA host pause.\n* rank 1 idle")
    assert loose.verdict == "Step 5 took 179.484 ms." and loose.details == ["A host pause."]
    assert loose.evidence == [Evidence("rank 1 idle", "")] and loose.action is None
    assert Reply.from_json(reply.to_json()) == reply
