"""The latency suite: percentiles per question and per tool from the root-cause suite's timed answers,
and, slow, from the offline agent asked about a real synthetic job."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.latency import answers_of, run_latency, summarize
from bottleneck_oracle.evals.types import Case, CaseResult, Expect, SuiteResult
from tests.agent.cases import workspace
from tests.evals.conftest import stalled_job


def _calls(*ms: float | None) -> list[dict[str, object]]:
    return [{"name": "explain_step" if i == 0 else "whatif", "ms": m, "ok": m is not None} for i, m in enumerate(ms)]


def test_run_latency_reads_the_rootcause_rows(tmp_path: Path) -> None:
    rootcause = SuiteResult("rootcause", {}, (
        CaseResult("a", True, {"questions": [{"question": "q1", "seconds": 1.0, "tool_calls": _calls(100.0, 50.0)},
                                             {"question": "q2", "seconds": 2.0, "tool_calls": _calls(200.0)}]}),
        CaseResult("b", False, {"seconds": 3.0, "tool_calls": _calls(300.0, None)}),  # one question on the row
        CaseResult("c", True, {"seconds": [4.0, 10.0], "tool_calls": [_calls(400.0), _calls(500.0, 70.0)]}),
        CaseResult("not_asked", True, {"seconds": 99.0}),
    ))
    cases = [Case(c, tmp_path, ("Why?",), Expect("none", 1)) for c in "abc"]
    result = run_latency(cases, Settings(home=tmp_path, workers=2), rootcause=rootcause)
    m = result.metrics
    assert m["n"] == 5 and [r.case for r in result.cases] == ["a", "b", "c"]
    assert (m["latency_p50_s"], m["latency_p95_s"], m["latency_max_s"]) == (3.0, 8.8, 10.0)
    assert m["tool_calls_mean"] == 1.6  # 8 calls over 5 questions
    assert m["tools"]["explain_step"] == {"calls": 5, "failed": 0, "p50_ms": 300.0, "p95_ms": 480.0}
    assert m["tools"]["whatif"] == {"calls": 3, "failed": 1, "p50_ms": 60.0, "p95_ms": 69.0}  # no ms: not timed
    a, b, c = result.cases
    assert a.details["seconds"] == [1.0, 2.0] and a.details["tool_calls"] == [2, 1]
    assert a.details["tool_ms"] == {"explain_step": 300.0, "whatif": 50.0}
    assert not b.passed and c.details["questions"] == 2


def test_answers_of_nothing_timed_is_empty() -> None:
    assert answers_of({"expected": {"category": "none"}}) == []
    assert summarize([])["latency_p50_s"] is None and summarize([])["tool_calls_mean"] is None


@pytest.mark.slow  # the server, the sentence model and one agent turn: ~30 s on 2 cores
def test_run_latency_asks_the_offline_agent(tmp_path: Path) -> None:
    folder = stalled_job(tmp_path / "stall")
    with workspace(tmp_path / "home") as settings:
        result = run_latency([Case("stall", folder, ("Why is step 2 slow?",), Expect("dataloader_stall", 2))],
                             settings)
    (row,) = result.cases
    m = result.metrics
    assert row.passed and m["n"] == 1 and m["latency_p50_s"] == m["latency_p95_s"] > 0
    assert m["tool_calls_mean"] >= 1 and "explain_step" in m["tools"]
    assert m["tools"]["explain_step"]["p50_ms"] > 0 and m["tools"]["explain_step"]["failed"] == 0
    # the tools of one round run side by side, so each (not their sum) fits inside the question's time
    assert max(row.details["tool_ms"].values()) / 1000 < row.details["seconds"][0]
