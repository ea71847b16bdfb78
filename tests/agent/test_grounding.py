"""The grounding check: numbers in an answer against the numbers the tools returned."""

from __future__ import annotations

from bottleneck_oracle.agent.grounding import answer_numbers, contract_problems, source_numbers, ungrounded

TOOL = '{"step": 5, "rank": 1, "wall_ms": 179.484, "median_ms": 32.948, "delta_ms": {"idle": 153.454}}'


def test_numbers_in_names_and_ids_are_not_numbers() -> None:
    text = "ProfilerStep#5 on rank0 of gpt_2rank (trace f825423f3e3ea2a2) ran aten::mm, scale op=allreduce x2"
    assert answer_numbers(text) == []


def test_numbers_with_units_signs_and_factors_are_read() -> None:
    assert answer_numbers("step 5: 179.484 ms (+153.454 ms, 444.7%), 2x faster, 12.5s.") == [
        "5", "179.484", "153.454", "444.7", "2", "12.5"]


def test_a_number_from_a_tool_is_grounded_as_given_or_rounded() -> None:
    assert ungrounded("Step 5 took 179.484 ms on rank 1, against 32.948 ms", [TOOL]) == []
    assert ungrounded("Step 5 took 179.5 ms (about 179 ms); idle grew by +153.45 ms", [TOOL]) == []


def test_a_number_no_tool_returned_is_listed_once() -> None:
    answer = "Step 5 took 179.484 ms, 5.45x its median and 146.5 ms more; 146.5 ms is the pause"
    assert ungrounded(answer, [TOOL]) == ["5.45", "146.5"]


def test_numbers_of_the_question_count_as_sources() -> None:
    assert ungrounded("With the all-reduce 3x faster, step 5 takes 179.484 ms",
                      ["what if the all-reduce were 3x faster?", TOOL]) == []


def test_source_numbers_read_json_and_exponents() -> None:
    assert source_numbers(['{"a": -1.5, "b": 2e3, "c": "x7"}']) >= {1.5, 2000.0, 7.0}


def test_an_answer_keeps_to_the_contract_or_says_how_it_does_not() -> None:
    good = "Step 5 is slow: 179.484 ms on rank 1.\n- idle +153.454 ms [explain_step]\nDo: fix it\nCheck: oracle whatif"
    assert contract_problems(good) == []
    assert contract_problems("A host pause made step five slow.\n- 179.484 ms [explain_step]") == [
        "its first line is not a verdict with a number from a tool result"]
    six = "Step 5 took 179.484 ms.\n" + "\n".join(f"- line {i} [explain_step]" for i in range(6))
    assert contract_problems(six) == ["it has more than 5 evidence lines"]
    assert contract_problems("I cannot answer that from the traces.") == []
    assert contract_problems("This trace has no GPU events: I cannot say how busy the GPU was.") == []
