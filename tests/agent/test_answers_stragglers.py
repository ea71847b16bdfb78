"""The answers about a pipeline job's stragglers, written from the agent's own ``straggler_report`` tool on the
paper's jobs (AR: one slow worker; ST: an unbalanced last stage) and a synthetic job with none: the contract's
parts, the tool's numbers as it gave them (the grounding check passes), the check a user runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool

from bottleneck_oracle.agent.answers import write_answer, write_reply
from bottleneck_oracle.agent.grounding import contract_problems, ungrounded
from bottleneck_oracle.agent.intents import read_slots
from bottleneck_oracle.agent.planner import Result, pipeline_edits
from bottleneck_oracle.agent.reply import Reply
from bottleneck_oracle.agent.tools import ToolContext, make_tools
from bottleneck_oracle.config import Settings
from bottleneck_oracle.synth.straggler_jobs import StragglerJobSpec, write_job
from tests.conftest import STRAGGLERS


@pytest.fixture(scope="module")
def pipeline_tool(tmp_path_factory: pytest.TempPathFactory) -> BaseTool:
    """The agent's straggler_report tool: it reads op tables alone (no graph database)."""
    home = tmp_path_factory.mktemp("pipeline_home")
    return next(t for t in make_tools(ToolContext(Settings(home=home, workers=2))) if t.name == "straggler_report")


def _pipeline(tool: BaseTool, question: str, job: Path) -> tuple[Reply, str, dict[str, Any]]:
    """The answer to ``question`` on the job at ``job``, its plan made as the offline planner makes it, and the
    tool's result it was written from."""
    slots = read_slots(question)
    args = {"pipeline": str(job)} | ({"whatif": pipeline_edits(slots)} if pipeline_edits(slots) else {})
    result = Result("straggler_report", args, json.loads(tool.invoke(args)))
    reply = write_reply("stragglers", slots, [result])
    text = reply.render(verbose=True)
    assert ungrounded(text, [question, json.dumps(result.data)]) == []
    assert contract_problems(reply.render()) == []
    return reply, text, result.data


def _predicted(p: dict[str, Any]) -> str:
    """A fix's or a what-if's numbers as the answer writes them (seconds to the millisecond)."""
    lo, hi = p["interval_s"]
    return f"(interval {lo:.3f} to {hi:.3f} s), saving {p['saving_s']:.3f} s ({p['saving_pct']}%)"


def test_a_slow_worker_is_named_with_its_fix_interval_and_check(pipeline_tool: BaseTool) -> None:
    reply, text, r = _pipeline(pipeline_tool, "which workers hold this job back?", STRAGGLERS / "AR")
    assert reply.verdict == r["headline"]
    assert reply.verdict.startswith("One slow worker holds the job back: rank 0 (dp_rank 0, stage 0)")
    assert "S = 1.973" in reply.verdict  # the paper's published S
    assert {e.tool for e in reply.evidence} == {"straggler_report"}
    assert "Shares of the gap: M_W = 1.00 with rank 0 (dp_rank 0, stage 0) healthy, last stage M_S = 0.00" in text
    assert "Leading the slowdown: dp_rank 0 (1.973), stage 0 (" in text
    assert reply.action is not None and reply.action.startswith("replace or drain rank 0 (dp_rank 0, stage 0)")
    fix = r["fixes"][0]
    assert f"a step takes {fix['predicted_step_s']:.3f} s instead of 46.336 s {_predicted(fix)}" in reply.action
    assert reply.confidence is not None and reply.confidence.startswith("high: replay of the job's own steps")
    assert reply.check == f"oracle stragglers {STRAGGLERS / 'AR'} --whatif 'fix straggler_rank rank=0'"


def test_a_what_if_asked_comes_first_with_its_interval(pipeline_tool: BaseTool) -> None:
    reply, _, r = _pipeline(pipeline_tool, "what if rank 0 were healthy?", STRAGGLERS / "AR")
    (w,) = r["whatif"]
    assert reply.verdict.startswith(f"What if `fix straggler_rank rank=0`: a step of "
                                    f"{w['predicted_step_s']:.3f} s instead of 46.336 s {_predicted(w)}")
    assert reply.evidence[0].text.startswith("One slow worker holds the job back: rank 0")  # the job's verdict next
    assert w["saving_pct"] > 40  # healthy, the slow worker's step takes about half as long
    reply, _, _ = _pipeline(pipeline_tool, "and what if rank 4 were healthy?", STRAGGLERS / "AR")
    assert "no measurable change" in reply.verdict  # rank 4 already runs as its peers do


def test_one_bad_node_or_the_split_is_answered_from_the_cause_and_shares(pipeline_tool: BaseTool) -> None:
    question = "is it one bad node or the pipeline split?"
    reply, _, _ = _pipeline(pipeline_tool, question, STRAGGLERS / "AR")
    assert reply.verdict.startswith("A bad node, not the pipeline split: the share of the gap of rank 0 (dp_rank 0, "
                                    "stage 0) is M_W = 1.00, the stage split's only M_S = 0.00")
    reply, _, _ = _pipeline(pipeline_tool, question, STRAGGLERS / "ST")
    assert reply.verdict.startswith("The pipeline split, not a bad node: stage 3's share of the gap is 1.22")
    assert "M_W = 0.03" in reply.verdict and "S = 1.179" in reply.verdict
    assert reply.action is not None and reply.action.startswith("move layers off stage 3")
    assert reply.check == f"oracle stragglers {STRAGGLERS / 'ST'} --whatif 'move_layer 3->2 layers=L'"


def test_a_layer_move_without_the_layers_per_stage_asks_for_them(pipeline_tool: BaseTool) -> None:
    reply, _, _ = _pipeline(pipeline_tool, "what if I moved a layer from stage 3 to stage 0?", STRAGGLERS / "ST")
    assert reply.evidence[0].text.startswith("Moving a layer from stage 3 to stage 0 needs the layers each stage holds")
    assert reply.check is not None and reply.check.endswith("--whatif 'move_layer 3->0 layers=L'")
    reply, _, _ = _pipeline(pipeline_tool, "move a layer from stage 3 to 0 with 8 layers per stage", STRAGGLERS / "ST")
    assert reply.verdict.startswith("What if `move_layer 3->0 layers=8`: a step of")


def test_a_job_without_stragglers_says_so_with_no_action(pipeline_tool: BaseTool, tmp_path: Path) -> None:
    job = write_job(StragglerJobSpec(dp=2, pp=2, steps=3, microbatches=4, seed=1), tmp_path / "clean")
    reply, _, _ = _pipeline(pipeline_tool, "is it one bad node or the pipeline split?", job)
    assert reply.verdict.startswith("Neither a bad node nor the split: No stragglers: the job runs within")
    assert reply.action is None and reply.check == f"oracle stragglers {job}"


def test_a_pipeline_question_without_a_job_says_to_pass_it(pipeline_tool: BaseTool) -> None:
    result = Result("straggler_report", {}, json.loads(pipeline_tool.invoke({})))
    text = write_answer("stragglers", read_slots("is the pipeline unbalanced?"), [result])
    assert text.startswith("I cannot answer this: no pipeline job given: pass --pipeline PATH")
