"""The offline planner's reading of a question: every intent asked many ways gives one tool plan.

The paraphrases here are not the examples of ``prompts/intents.yaml`` (a test asserts that): they
are what a user might type, and they must land on their intent by meaning, not by wording.
"""

from __future__ import annotations

import pytest

from bottleneck_oracle.agent.intents import classify, read_slots
from bottleneck_oracle.agent.planner import Call, next_calls
from bottleneck_oracle.prompts import load_yaml

# intent -> (the first round of tool calls every paraphrase must give, the paraphrases)
PARAPHRASES: dict[str, tuple[list[Call], list[str]]] = {
    "why_slow": ([Call("explain_step", {"step": 5})], [
        "what makes iteration 5 so slow",
        "step 5 takes forever, why?",
        "can you explain why step 5 is so long",
        "why did step 5 blow up",
        "something is off with step 5, what is it?",
        "step 5 is way slower than the rest - what happened?",
    ]),
    "straggler": ([Call("stragglers", {})], [
        "who is the straggler here",
        "is one rank slower than the others",
        "which rank keeps everybody waiting at the collectives",
        "which worker is the slowpoke",
        "find the rank that lags behind",
    ]),
    "critical_path": ([Call("critical_subgraph", {"step": 5})], [
        "what's on the critical path for step 5",
        "which ops make up the longest path in step 5",
        "what dominates the critical path of iteration 5",
        "show the chain of operations that determines step 5's duration",
        "trace the critical path through step 5",
    ]),
    "compare_steps": ([Call("compare_steps", {"step_a": 3, "step_b": 5})], [
        "compare iteration 5 to iteration 3",
        "how is step 5 different from step 3",
        "step 5 versus step 3: what changed",
        "what distinguishes step 5 from step 3",
        "diff step 5 against step 3",
    ]),
    "compare_ranks": ([Call("compare_ranks", {"rank_b": 5, "rank_a": 3})], [
        "how is rank 5 different from rank 3",
        "rank 5 versus rank 3: what differs",
        "compare gpu 5 against gpu 3",
        "what does rank 5 do that rank 3 does not",
        "contrast ranks 5 and 3",
    ]),
    "compare_runs": ([Call("list_traces", {})], [
        "why is the new run slower than the old run",
        "compare this run with the last one",
        "what got worse between the two jobs",
        "is this run slower than the baseline run, and why",
        "how do the two profiles compare",
    ]),
    "whatif": ([Call("whatif", {"edit": "scale op=allreduce x2"})], [
        "how would the step time change if all-reduce ran 2 times faster",
        "what if allreduce took half the time",
        "suppose the all reduce were twice as fast, what then?",
        "predict the step time with a 2x faster all-reduce",
        "what do we gain if all-reduce gets 2x quicker",
    ]),
    "optimize": ([Call("optimize", {"budget": 1})], [
        "what is the first thing I should fix",
        "what's the single best change to speed things up",
        "how should I speed up this job",
        "which optimization should I try first",
        "tell me what to change to make training faster",
    ]),
    "seen_before": ([Call("explain_step", {})], [
        "have we run into this before",
        "did any other job show the same problem",
        "is this a recurring problem across our runs",
        "was this bottleneck already seen in an earlier trace",
        "do past traces have the same finding",
    ]),
    "list_steps": ([Call("list_steps", {})], [
        "show me the step times",
        "how long did every step take",
        "give me the duration of each iteration",
        "list all iterations with their wall time",
        "what are the per-step timings",
    ]),
    "gpu_busy": ([Call("job_bound", {})], [  # no step named: the run's steady steps
        "how much of the time was the GPU doing work",
        "what was the GPU utilization",
        "was the GPU idle a lot",
        "how much was the GPU busy in total",
        "how saturated was the GPU",
    ]),
    "hang": ([Call("hang_report", {})], [
        "why is my job hanging",
        "the run got stuck, which rank is responsible",
        "why did the distributed job freeze",
        "which rank never showed up to the collective and hung everything",
        "what do the dumps say about the hang",
        "where in the code are the ranks stuck",
        "we hit an NCCL timeout, what caused it",
        "is my job deadlocked",
        "the job has been stuck for an hour, why",
        "which process group is the hang in",
    ]),
    "stragglers": ([Call("straggler_report", {})], [
        "which workers slow this pipeline job down, and what would we gain without them",
        "are the pipeline stages balanced",
        "which stage of the pipeline is overloaded",
        "is one machine dragging the whole pipeline down",
        "where is the straggler in this pipeline-parallel run, by stage and replica",
        "how far is this pipeline job from its ideal step time",
        "should I move layers between pipeline stages",
        "is it a hardware problem or a partitioning problem in the pipeline",
        "what is slowing down my pipeline parallel training",
        "how much does the slowest worker cost the pipeline job",
    ]),
    "out_of_scope": ([], [
        "what's the weather in Paris",
        "write a haiku about GPUs",
        "who is the president of Brazil",
        "recommend a good movie",
        "what is 2 plus 2 in Roman numerals",
    ]),
}


def _plan(question: str) -> list[Call]:
    return next_calls(classify(question).name, read_slots(question), question, []) or []


@pytest.mark.parametrize("intent", sorted(PARAPHRASES))
def test_every_paraphrase_gives_the_same_tool_plan(intent: str) -> None:
    expected, questions = PARAPHRASES[intent]
    assert len(questions) >= 5
    got = {q: (classify(q).name, _plan(q)) for q in questions}
    wrong = {q: g for q, g in got.items() if g != (intent, expected)}
    assert wrong == {}


def test_paraphrases_are_not_the_examples() -> None:
    examples = {q.lower() for questions in load_yaml("intents").values() for q in questions}
    assert examples.isdisjoint(q.lower() for _, qs in PARAPHRASES.values() for q in qs)


def test_slots_read_steps_in_the_order_written_and_ranks_factors_targets() -> None:
    s = read_slots("why is step 7 slower than step 2 on rank 3 if the all-gather were 1.5x faster")
    assert (s.steps, s.ranks, s.factor, s.target) == ((7, 2), (3,), 1.5, "op=allgather")
    assert read_slots("ProfilerStep#12 and the 4th step").steps == (12, 4)
    assert read_slots("what if we used 8 data parallel replicas").data_parallel == 8
    assert read_slots("with 4 micro-batches").microbatches == 4
    assert read_slots("if the host pause were fixed").category == "host_pause"
    assert read_slots("how long does aten::mm take").names == ("aten::mm",)
    assert read_slots("is the step normal").target is None  # 'normal' is not a norm layer


def test_a_slow_down_is_a_factor_below_one_and_a_comparison_of_steps_is_none() -> None:
    cases = {"what if the all-reduce were 2x slower?": 0.5, "what if gemm took 4 times longer": 0.25,
             "what if the all reduce was twice as slow": 0.5, "what if the network were slower?": 0.5,
             "what if the all-reduce were half as fast": 0.5, "what if the all-reduce were 2x faster?": 2.0,
             "why is step 7 slower than step 2 if the all-gather were 1.5x faster": 1.5}
    assert {q: read_slots(q).factor for q in cases} == cases
    assert read_slots("why is step 3 slower than step 2?").factor is None


def test_numbers_do_not_change_the_intent() -> None:
    assert classify("why is step 3 slow?").name == classify("why is step 3817 slow?").name == "why_slow"


def test_slots_read_a_pipeline_jobs_what_ifs() -> None:
    moved = read_slots("what if I moved a layer from stage 3 to stage 0, with 8 layers per stage?")
    assert (moved.stage_move, moved.layers) == ((3, 0), 8)
    assert read_slots("move_layer 3->0 layers=8").stage_move == (3, 0)
    assert read_slots("move a layer from stage 3 to 0").layers is None  # the edit needs them: none guessed
    assert read_slots("step 3 to 5 with more layers").stage_move is None  # steps, not stages
    assert read_slots("would equal micro-batches help?").even_work and not read_slots("is stage 1 even").even_work
    assert read_slots("is it one bad node or the pipeline split?").either
    assert not read_slots("which node is slow?").either and not read_slots("stage 3 or stage 2?").either
    assert read_slots("what if rank 37 were healthy?").fix
