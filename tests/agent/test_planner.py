"""The offline planner's rounds of tool calls and the edits it reads from a what-if question."""

from __future__ import annotations

from bottleneck_oracle.agent.intents import read_slots
from bottleneck_oracle.agent.planner import Call, Result, cypher_call, edit_for, next_calls, pipeline_edits
from bottleneck_oracle.truth.edits import parse_edit

CAUSE = {"category": "host_pause", "ranks": [1], "ops": ["aten::select"], "impact_ms": 146.5, "evidence": "paused"}


def test_edits_read_from_questions_parse_in_the_edit_language() -> None:
    cases = {"what if the all-reduce were 3x faster": "scale op=allreduce x3",
             "what if gemm kernels were twice as fast": "scale op=gemm x2",
             "what if the send/recv were removed": "remove op=sendrecv",
             "what if the host pause were fixed": "fix host_pause",
             "what if we removed the dataloader stall": "fix dataloader_stall",
             "what if I used 8 data parallel replicas": "data_parallel=8",
             "what if we used 4 micro-batches": "microbatches=4"}
    for question, edit in cases.items():
        assert edit_for(read_slots(question)) == edit
        parse_edit(edit)  # every edit the planner writes is one the engine reads
    assert edit_for(read_slots("what if it were better")) is None


def test_why_slow_explains_then_predicts_the_fix_of_the_cause() -> None:
    slots = read_slots("why is step 5 slow?")
    assert next_calls("why_slow", slots, "q", []) == [Call("explain_step", {"step": 5})]
    explained = Result("explain_step", {"step": 5}, {"step": 5, "cause": CAUSE})
    second = next_calls("why_slow", slots, "q", [explained])
    assert [c.name for c in second] == ["whatif", "playbook_search"] and second[0].args == {"edit": "fix host_pause",
                                                                                           "step": 5}
    done = [explained, Result("whatif", {}, {}), Result("playbook_search", {}, {})]
    assert next_calls("why_slow", slots, "q", done) is None
    # a step with no cause that is not slow: its answer is the run's verdict
    alike = [Result("explain_step", {}, {"step": 5, "cause": None, "slow": False})]
    assert next_calls("why_slow", slots, "q", alike) == [Call("job_bound", {})]
    assert next_calls("why_slow", slots, "q", [*alike, Result("job_bound", {}, {})]) is None
    assert next_calls("why_slow", slots, "q", [Result("explain_step", {}, {"step": 5, "cause": None,
                                                                           "slow": True})]) is None


def test_a_question_about_the_run_asks_its_verdict_and_the_slowest_step() -> None:
    slots = read_slots("why is my training slow?")
    assert next_calls("why_slow", slots, "q", []) == [Call("job_bound", {}), Call("explain_step", {})]
    yes_no = read_slots("did any iteration run abnormally long?")
    assert yes_no.yes_no and not read_slots("which iteration ran longest?").yes_no
    assert next_calls("slowest_step", yes_no, "q", []) == [Call("list_steps", {}), Call("job_bound", {})]


def test_an_error_ends_the_plan() -> None:
    assert next_calls("why_slow", read_slots("step 42"), "q", [Result("explain_step", {}, {"error": "no"})]) is None


def test_compare_runs_names_the_subject_first_and_the_reference_second() -> None:
    traces = Result("list_traces", {}, {"traces": [{"trace_id": "b1", "name": "run_b", "status": "complete"},
                                                   {"trace_id": "a1", "name": "run_a", "status": "complete"}]})
    q = "why is run_b slower than run_a?"
    assert next_calls("compare_runs", read_slots(q), q, [traces]) == [
        Call("compare_runs", {"base": "run_a", "other": "run_b"})]
    q = "compare the two runs"  # none named: the newest against the one before
    assert next_calls("compare_runs", read_slots(q), q, [traces]) == [
        Call("compare_runs", {"base": "a1", "other": "b1"})]


def test_a_free_question_takes_the_nearest_read_only_template() -> None:
    call = cypher_call("how many times was aten::mm called", read_slots("how many times was aten::mm called"))
    assert call.args["params"] == {"name": "aten::mm"} and "$name" in call.args["query"]
    call = cypher_call("list the collectives", read_slots("list the collectives"))
    assert "$step" not in call.args["query"]  # no step named: every step


def test_a_pipeline_question_asks_the_straggler_report_its_what_ifs() -> None:
    cases = {"what if rank 37 were healthy?": ["fix straggler_rank rank=37"],
             "how much faster without stragglers?": ["fix straggler_rank"],
             "what if ranks 3 and 5 were fixed": ["fix straggler_rank rank=3,5"],
             "move a layer from stage 3 to 0 with 8 layers per stage": ["move_layer 3->0 layers=8"],
             "move a layer from stage 3 to 0": [],  # the edit needs the layers per stage: the answer asks for them
             "would equal micro-batches speed it up?": ["even_microbatches"],
             "is it one bad node or the pipeline split?": []}
    for question, edits in cases.items():
        assert pipeline_edits(read_slots(question)) == edits, question
        for edit in edits:
            parse_edit(edit)  # every edit the planner writes is one `oracle stragglers --whatif` reads
        args = {"whatif": edits} if edits else {}
        assert next_calls("stragglers", read_slots(question), question, []) == [Call("straggler_report", args)]
    done = [Result("straggler_report", {}, {"cause": "none"})]
    assert next_calls("stragglers", read_slots("is the pipeline unbalanced?"), "q", done) is None


def test_a_yes_no_question_and_the_bound_it_names_are_read() -> None:
    assert read_slots("is my job GPU-bound?").bounds == ("gpu",) and read_slots("is my job GPU-bound?").yes_no
    assert read_slots("Is the run limited by data loading?").bounds == ("input",)
    either = read_slots("Is the whole job bound by communication or by the host?")
    assert not either.yes_no  # "X or Y?" asks which, not whether
