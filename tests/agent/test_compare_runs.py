"""The agent's ``compare_runs`` is ``oracle diff``: two real captures loaded by name (the GPT job with and
without a 150 ms data-loading stall in every step, ``tests/data/diff_pair``), and the offline agent
asked to compare them gives the diff's verdict first, its confidence and comparability, and names the
cause (data loading, the dataloader_stall finding that appeared) with the what-if engine's check."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bottleneck_oracle.agent.tools import ToolContext, make_tools
from bottleneck_oracle.config import Settings
from bottleneck_oracle.workspace.diff import diff_traces
from bottleneck_oracle.workspace.ingest import ingest
from tests.agent.cases import ask, workspace
from tests.conftest import DATA

PAIR = DATA / "diff_pair"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with workspace(tmp_path_factory.mktemp("pair_home")) as s:
        for name in ("base", "stall"):
            ingest([PAIR / name], s)
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
    assert out["cause"]["category"] == "data_loading" and out["cause"]["finding"]["category"] == "dataloader_stall"
    assert out["whatif"]["edit"] == "fix dataloader_stall" and out["whatif"]["applied_to"] == "new"


def test_asked_by_name_the_agent_gives_the_verdict_first_and_names_the_cause(settings: Settings) -> None:
    [answer] = ask(settings, "stall", "Why is run stall slower than run base?")
    assert answer.grounded, answer.ungrounded_numbers
    assert [c["name"] for c in answer.tool_calls][-1] == "compare_runs"
    text = answer.answer
    verdict = text.splitlines()[0]
    assert verdict.startswith("stall is slower than base by ") and "confidence 100%" in verdict, text
    assert "comparability high" in verdict
    assert "The cause: data_loading" in text and "dataloader_stall on rank(s) 0 appeared" in text
    assert "`fix dataloader_stall` applied to stall predicts" in text
    assert text.index("The cause") < text.index("Categories that moved")

def test_the_other_way_round_the_change_helped(settings: Settings) -> None:
    [answer] = ask(settings, "base", "Did my change help? Compare base against stall.")
    assert answer.grounded, answer.ungrounded_numbers
    assert "is faster than" in answer.answer or "is slower than" in answer.answer
    assert "data_loading" in answer.answer
