"""The agent's ``compare_runs`` is ``oracle diff``: two real captures loaded by name (the GPT job with and
without a 150 ms data-loading stall in every step, ``tests/data/diff_pair``), and the offline agent
asked to compare them gives the diff's verdict first, its confidence and comparability, and names the
cause (data loading, the dataloader_stall finding that appeared) with the what-if engine's check; and the
ResNet-50 pair of DataLoader workers 0 and 4 (``tests/data/resnet50_loader_workers``), where the change helped."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bottleneck_oracle.agent.tools import ToolContext, make_tools
from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import Detail
from bottleneck_oracle.workspace.diff import diff_traces
from bottleneck_oracle.workspace.ingest import ingest
from tests.agent.cases import ask, workspace
from tests.conftest import DATA

PAIR = DATA / "diff_pair"
RESNET = DATA / "resnet50_loader_workers" / "june"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with workspace(tmp_path_factory.mktemp("pair_home")) as s:
        for name in ("base", "stall"):
            ingest([PAIR / name], s, detail=Detail.SUMMARY, predict=False, memory=False)
        yield s


def test_the_tool_returns_the_diffs_own_verdict(settings: Settings) -> None:
    ctx = ToolContext(settings)
    try:
        tool = next(t for t in make_tools(ctx) if t.name == "compare_runs")
        out = json.loads(tool.invoke({"base": "base", "other": "stall"}))
    finally:
        ctx.close()
    same = diff_traces("base", "stall", settings)
    assert out["headline"] == same.diff.headline() and out["verdict"] == "slower"
    assert out["comparability"]["level"] == same.diff.comparability["level"]
    assert out["cause"] == same.cause() and out["cause"]["category"] == "data_loading"
    assert out["cause"]["finding"] == "dataloader_stall" and out["cause"]["change"] == "appeared"
    assert out["whatif"]["edit"] == "fix dataloader_stall" and out["whatif"]["applied_to"] == "new"
    for side, v in (("base", same.base_verdict), ("new", same.new_verdict)):  # each run's own verdict
        assert v is not None and out[f"{side}_verdict"]["verdict"] == v.verdict
        assert out[f"{side}_verdict"]["headline"] == v.headline()


def test_asked_by_name_the_agent_gives_the_verdict_first_and_names_the_cause(settings: Settings) -> None:
    [answer] = ask(settings, "stall", "Why is run stall slower than run base?")
    assert answer.grounded, answer.ungrounded_numbers
    assert [c["name"] for c in answer.tool_calls][-1] == "compare_runs"
    text = answer.answer
    verdict = text.splitlines()[0]
    assert verdict.startswith("stall is slower than base by ") and "confidence 100%" in verdict, text
    assert "95% interval +" in verdict
    assert "The cause: data loading rose from 0.4 to 151.1 ms a step: the dataloader_stall finding on rank(s) 0 " \
           "appeared; fixing it in stall (`fix dataloader_stall`) predicts" in text
    assert text.index("The cause") < text.index("What moved") < text.index("Comparability high")
    assert "Findings that moved: straggler_rank on rank(s) 0 appeared" in text  # the cause's own is said once
    assert answer.cause == diff_traces("base", "stall", settings).cause()  # oracle ask --json carries it

def test_the_other_way_round_the_change_helped(settings: Settings) -> None:
    [answer] = ask(settings, "base", "Did my change help? Compare base against stall.")
    assert answer.grounded, answer.ungrounded_numbers
    assert "is faster than" in answer.answer or "is slower than" in answer.answer
    assert "data_loading" in answer.answer


def test_the_resnet_loader_workers_pair_the_change_helped(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ResNet-50 on one GPU, DataLoader workers 0 against 4 (a real pair): the run with workers is faster and
    the cause is the data loading that went away, with its finding."""
    if not RESNET.is_dir():
        pytest.skip(f"{RESNET} is not there")
    with workspace(tmp_path_factory.mktemp("resnet_home")) as s:
        for name in ("nw0", "nw4"):
            ingest([RESNET / name], s, detail=Detail.SUMMARY, predict=False, memory=False)  # the diff reads the traces
        [slower, since] = ask(s, "nw4", "why is nw0 slower than nw4?", "what changed since yesterday's run?")
    assert slower.grounded and since.grounded, (slower.ungrounded_numbers, since.ungrounded_numbers)
    assert slower.answer.startswith("nw0 is slower than nw4 by 52.252 ms"), slower.answer
    assert "data loading rose from 0 to 58.8 ms a step: the dataloader_stall finding appeared" in slower.answer
    assert "nw0 is input-bound" in slower.answer
    assert slower.cause is not None and slower.cause["delta_ms"] == 58.816
    assert since.answer.startswith("nw4 is faster than nw0 by 52.252 ms"), since.answer  # the older run the base
    assert since.cause is not None and since.cause["change"] == "went away"
