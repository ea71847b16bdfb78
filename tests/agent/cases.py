"""Shared parts of the agent's end-to-end tests: a workspace with its own embedded FalkorDB, jobs to
ask about (synthetic GPU runs; the captured CPU runs are tests/captured_data.py), and the checks every
answer about a slow step must pass: the cause the analysis found, its step, rank(s) and a culprit op,
all said in the text, and every number grounded in a tool result."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bottleneck_oracle.agent.conversation import Answer, Conversation
from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.config import Settings
from bottleneck_oracle.findings.finding import MAJOR, Finding
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.truth.injection import parse_injection
from bottleneck_oracle.vocabulary import Bottleneck

# the tools the offline planner's plan for "why is step N slow?" may call
WHY_SLOW_PLAN = frozenset({"explain_step", "whatif", "playbook_search"})
# categories a clean answer must not name (any of them would be an invented cause)
CAUSES = tuple(b.value for b in Bottleneck if b is not Bottleneck.NONE)
_NOT_ANOMALOUS = re.compile(r"\bnot anomalous\b|\bno step of trace .+ is anomalous\b", re.I)


@contextmanager
def workspace(home: Path) -> Iterator[Settings]:
    """Settings of a fresh workspace in ``home``; its FalkorDB server stops on exit."""
    try:
        yield Settings(home=home, workers=2)
    finally:
        stop_server(home)


def ask(settings: Settings, trace: str | Path, *questions: str) -> list[Answer]:
    """The offline agent's answers to ``questions``, in one conversation about ``trace``."""
    with Conversation(settings, trace=str(trace), llm="offline") as conversation:
        return [conversation.ask(q) for q in questions]


def folder_of(a: Analysis) -> Path:
    """The folder of the trace ``a`` analysed."""
    return Path(a.graph.trace.ranks[0].path).parent


def synth_job(folder: Path, inject: str, **job: object) -> Path:
    """A synthetic GPU job (4 steps unless ``job`` says) with the faults of ``inject`` (``;`` between two), as
    ``tests/analysis/synth_cases.py`` makes them, in ``folder``."""
    injections = tuple(parse_injection(i) for i in inject.split(";"))
    synthesize(folder, SynthConfig(**{"steps": 4, "injections": injections, **job}))  # type: ignore[arg-type]
    return folder


def analysis_cause(a: Analysis, step: int) -> Finding | None:
    """What the analysis blames for ``step``: its cause (``findings/cause.py``), else its first major finding,
    when the step is slow (what ``workspace.steps.explain_step`` reports as the cause)."""
    if step not in {s.step for s in a.slow_steps}:
        return None
    return a.cause(step) or next((f for f in a.findings if f.step == step and f.severity == MAJOR), None)


def _where(answer: Answer) -> str:
    return f"{answer.question!r} -> cause {answer.cause}, step {answer.step}: {answer.answer}"


def assert_grounded(answer: Answer) -> None:
    """Answered, from tool results that all succeeded, with every number grounded."""
    assert answer.answered, answer.reason
    assert all(c["ok"] for c in answer.tool_calls), answer.tool_calls
    assert answer.grounded and answer.ungrounded_numbers == [], (answer.ungrounded_numbers, answer.answer)


def assert_names_cause(answer: Answer, *, category: str, step: int, ranks: tuple[int, ...] = ()) -> None:
    """The answer blames ``category`` at ``step`` (on ``ranks`` when given) and names a culprit op,
    in its fields and in its text, grounded."""
    assert_grounded(answer)
    cause, text = answer.cause, answer.answer
    assert cause is not None and cause["category"] == category, _where(answer)
    assert category in text, _where(answer)
    assert answer.step == step and re.search(rf"\bstep {step}\b", text, re.I), _where(answer)
    for rank in ranks:
        assert rank in cause["ranks"], _where(answer)
        assert re.search(rf"\branks?(\(s\))?\s+(\d+,\s*)*{rank}\b", text), _where(answer)
    assert cause["ops"], _where(answer)
    assert any(op in text for op in cause["ops"]), _where(answer)
    assert {c["name"] for c in answer.tool_calls} <= WHY_SLOW_PLAN, answer.tool_calls
    assert answer.evidence, _where(answer)


def assert_not_anomalous(answer: Answer) -> None:
    """The answer says the step (or every step) is not anomalous and names no cause."""
    assert_grounded(answer)
    assert answer.cause is not None and answer.cause["category"] == Bottleneck.NONE.value, _where(answer)
    assert answer.cause["ranks"] == [] and answer.cause["ops"] == [], _where(answer)
    assert _NOT_ANOMALOUS.search(answer.answer), _where(answer)
    assert not [c for c in CAUSES if c in answer.verdict], _where(answer)
    # no evidence of a cause: at most the run's verdict, since its steps are alike
    assert answer.suggestions == [] and all(e["tool"] == "job_bound" for e in answer.evidence), _where(answer)
    assert "whatif" not in {c["name"] for c in answer.tool_calls}, answer.tool_calls
