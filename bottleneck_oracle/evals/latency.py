"""The latency suite: how long the agent takes per question, and each of its tools per call.

It reads the answers the root-cause suite already timed (each row's ``details``: per question its
``seconds`` and ``tool_calls``, ``[{"name", "ms", "ok"}]``); without that suite's result it asks each
case's first question itself. Percentiles are numpy's linear ones; a tool call that never ran (its
arguments refused) has no ``ms`` and counts as a call, not as a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.types import Case, CaseResult, SuiteResult

__all__ = ["SUITE", "answers_of", "run_latency", "summarize"]

SUITE = "latency"
Progress = Callable[[int, int], None]  # (cases done, cases)
_ANSWER_LISTS = ("questions", "answers")


def _percentile(values: list[float], q: float, digits: int) -> float | None:
    return round(float(np.percentile(values, q)), digits) if values else None


def answers_of(details: dict[str, Any]) -> list[dict[str, Any]]:
    """The timed answers of one root-cause row: each ``{"seconds", "tool_calls"}``.

    Reads a list under ``questions`` or ``answers`` (one dict per question), else ``seconds`` and
    ``tool_calls`` on the row itself: one question, or parallel lists of them.
    """
    for key in _ANSWER_LISTS:
        listed = details.get(key)
        if isinstance(listed, list) and all(isinstance(a, dict) for a in listed):
            return [a for a in listed if "seconds" in a]
    seconds = details.get("seconds")
    calls = details.get("tool_calls", [])
    if isinstance(seconds, list):
        per_question = calls if calls and all(isinstance(c, list) for c in calls) else [[]] * len(seconds)
        return [{"seconds": s, "tool_calls": c} for s, c in zip(seconds, per_question)]
    if seconds is None:
        return []
    return [{"seconds": seconds, "tool_calls": calls}]


def summarize(answers: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The latency metrics of timed answers (see ``run_latency``)."""
    answers = list(answers)
    seconds = [float(a["seconds"]) for a in answers if a.get("seconds") is not None]
    per_tool: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    failed: dict[str, int] = defaultdict(int)
    for a in answers:
        for call in a.get("tool_calls") or []:
            name = str(call.get("name"))
            counts[name] += 1
            failed[name] += 0 if call.get("ok", True) else 1
            if call.get("ms") is not None:
                per_tool[name].append(float(call["ms"]))
    n_calls = sum(counts.values())
    return {
        "latency_p50_s": _percentile(seconds, 50, 3),
        "latency_p95_s": _percentile(seconds, 95, 3),
        "latency_max_s": round(max(seconds), 3) if seconds else None,
        "tool_calls_mean": round(n_calls / len(answers), 3) if answers else None,
        "tools": {name: {"calls": counts[name], "failed": failed[name],
                         "p50_ms": _percentile(per_tool[name], 50, 1), "p95_ms": _percentile(per_tool[name], 95, 1)}
                  for name in sorted(counts)},
        "n": len(answers),
    }


def _asked(cases: list[Case], settings: Settings, llm: str, base_url: str | None,
           progress: Progress | None) -> list[CaseResult]:
    """Each case's first question asked in a conversation of its own, timed."""
    from bottleneck_oracle.agent.conversation import Conversation  # the agent extra: only when asking here

    rows = []
    asking = [c for c in cases if c.questions]
    for i, case in enumerate(asking):
        with Conversation(settings, trace=str(case.trace), llm=llm, base_url=base_url) as conversation:
            answer = conversation.ask(case.questions[0])
        calls = [{"name": c["name"], "ms": c["ms"], "ok": c["ok"]} for c in answer.tool_calls]
        rows.append(CaseResult(case.id, answer.answered, {"question": answer.question, "seconds": answer.seconds,
                                                          "tool_calls": calls}))
        if progress:
            progress(i + 1, len(asking))
    return rows


def run_latency(cases: list[Case], settings: Settings, *, llm: str = "offline", base_url: str | None = None,
                progress: Progress | None = None, rootcause: SuiteResult | None = None) -> SuiteResult:
    """Latency per question and per tool call, from ``rootcause``'s rows when given (no question is
    asked again), else from each case's first question asked with ``llm`` (and ``base_url``).

    Returns:
        ``SuiteResult("latency", metrics, rows)`` with metrics ``{"latency_p50_s", "latency_p95_s",
        "latency_max_s": seconds per question, "tool_calls_mean": tool calls per question, "tools":
        {tool name: {"calls", "failed", "p50_ms", "p95_ms"}}, "n": questions timed}`` (None where
        nothing was timed); one row per case with ``questions``, ``seconds`` (per question),
        ``tool_calls`` (per question) and ``tool_ms`` (name -> total ms).
    """
    if rootcause is not None:
        wanted = {c.id for c in cases}
        source = [r for r in rootcause.cases if not wanted or r.case in wanted]
    else:
        source = _asked(cases, settings, llm, base_url, progress)
    rows: list[CaseResult] = []
    every: list[dict[str, Any]] = []
    for r in source:
        answers = answers_of(r.details)
        if not answers:
            continue
        every += answers
        tool_ms: dict[str, float] = defaultdict(float)
        for a in answers:
            for call in a.get("tool_calls") or []:
                tool_ms[str(call.get("name"))] += float(call.get("ms") or 0.0)
        rows.append(CaseResult(r.case, r.passed, {
            "questions": len(answers), "seconds": [a["seconds"] for a in answers],
            "tool_calls": [len(a.get("tool_calls") or []) for a in answers],
            "tool_ms": {k: round(v, 1) for k, v in sorted(tool_ms.items())}}))
    return SuiteResult(SUITE, summarize(every), tuple(rows))
