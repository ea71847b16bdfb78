"""The question suite: the phrasings of ``evals/questions.yaml`` (ten or more per intent, written for
the evaluation) and its multi-turn conversations, asked of the agent over the shipped example
(examples/gpt_2rank). Scored per intent (the intent the agent took, and the first tool calls where
the suite names them) and per turn of the conversations, beside two floors: a blind guess among the
intents and a findings-only agent that answers every question with the slow step's findings; with
the answers' length (characters and lines)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.types import Case, CaseResult, SuiteResult

__all__ = ["EXAMPLE", "SUITE", "SUITE_FILE", "Asked", "load_suite", "run_questions", "score"]

SUITE = "questions"
SUITE_FILE = Path(__file__).with_name("questions.yaml")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpt_2rank"
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Asked:
    """One question of the suite, what it should be taken as, and its conversation and turn (None: alone)."""

    q: str
    intent: str
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    conversation: str | None = None
    turn: int = 1


def _calls(raw: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple((name, dict(args or {})) for c in raw or [] for name, args in c.items())


def load_suite(path: Path = SUITE_FILE) -> list[Asked]:
    """The suite's questions: the phrasings, then the conversations' turns in order.

    Raises:
        ConfigError: a file that is not a suite.
    """
    try:
        data = yaml.safe_load(path.read_text())
        out = [Asked(e["q"], intent, _calls(e.get("calls"))) if isinstance(e, dict) else Asked(str(e), intent)
               for intent, entries in data.get("phrasings", {}).items() for e in entries]
        out += [Asked(t["q"], t["intent"], _calls(t.get("calls")), c["id"], i)
                for c in data.get("conversations", []) for i, t in enumerate(c["turns"], 1)]
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"question suite {path}: {type(e).__name__}: {e}") from None
    return out


def _calls_ok(expected: tuple[tuple[str, dict[str, Any]], ...], made: list[dict[str, Any]]) -> bool | None:
    """Whether every expected call was made with the arguments named (None: the suite names none)."""
    if not expected:
        return None
    return all(any(c["name"] == name and all(c["args"].get(k) == v for k, v in args.items()) for c in made)
               for name, args in expected)


def _offline_answers(questions: Sequence[Asked], settings: Settings, progress: Progress | None) -> list[dict[str, Any]]:
    """Each question asked of the offline agent over the example; a conversation's turns in one conversation."""
    from bottleneck_oracle.agent.conversation import Conversation

    out: list[dict[str, Any]] = []
    open_: dict[str | None, Any] = {}
    try:
        for i, a in enumerate(questions):
            if a.conversation is None or a.conversation not in open_:
                conv = Conversation(settings, trace=str(EXAMPLE))
                if a.conversation is not None:
                    open_[a.conversation] = conv
            else:
                conv = open_[a.conversation]
            answer = conv.ask(a.q)
            if a.conversation is None:
                conv.close()
            out.append({"intent": answer.intent, "tool_calls": answer.tool_calls, "answered": answer.answered,
                        "answer": answer.answer, "seconds": answer.seconds})
            if progress:
                progress(i + 1, len(questions))
    finally:
        for conv in open_.values():
            conv.close()
    return out


def classified(questions: Sequence[Asked]) -> list[dict[str, Any]]:
    """Each question's intent and first round of tool calls from the classifier and planner alone (no
    trace, no follow-up context): what the suite measures of the words."""
    from bottleneck_oracle.agent.intents import classify, read_slots
    from bottleneck_oracle.agent.planner import next_calls

    out = []
    for a in questions:
        intent = classify(a.q).name
        calls = next_calls(intent, read_slots(a.q), a.q, []) or []
        out.append({"intent": intent, "tool_calls": [{"name": c.name, "args": c.args} for c in calls]})
    return out


def _accuracy(rows: list[dict[str, Any]]) -> float | None:
    return round(sum(r["passed"] for r in rows) / len(rows), 3) if rows else None


def score(questions: Sequence[Asked], answers: Sequence[dict[str, Any]]) -> SuiteResult:
    """The suite's metrics from the answers (one per question, in order)."""
    rows = []
    for a, got in zip(questions, answers, strict=True):
        calls = _calls_ok(a.calls, got.get("tool_calls") or [])
        intent_ok = got.get("intent") == a.intent
        text = got.get("answer")
        rows.append({"q": a.q, "expected": a.intent, "intent": got.get("intent"), "intent_ok": intent_ok,
                     "calls_ok": calls, "passed": intent_ok and calls is not False, "conversation": a.conversation,
                     "turn": a.turn, "chars": len(text) if text else None,
                     "lines": len(text.splitlines()) if text else None, "answered": got.get("answered")})
    alone = [r for r in rows if r["conversation"] is None]
    by_intent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in alone:
        by_intent[r["expected"]].append(r)
    by_turn: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["conversation"] is not None:
            by_turn[f"turn {r['turn']}"].append(r)
    with_calls = [r for r in alone if r["calls_ok"] is not None]
    chars = [r["chars"] for r in rows if r["chars"] is not None]
    metrics: dict[str, Any] = {
        "questions": len(alone), "intent_accuracy": round(sum(r["intent_ok"] for r in alone) / len(alone), 3),
        "calls_accuracy": round(sum(bool(r["calls_ok"]) for r in with_calls) / len(with_calls), 3) if with_calls else None,
        "accuracy": _accuracy(alone), "turn_accuracy": _accuracy([r for rs in by_turn.values() for r in rs]),
        "per_intent": {k: {"accuracy": _accuracy(v), "n": len(v)} for k, v in sorted(by_intent.items())},
        "per_turn": {k: {"accuracy": _accuracy(v), "n": len(v)} for k, v in sorted(by_turn.items())},
        "baselines": {"blind": {"intent_accuracy": round(1 / max(len(by_intent), 1), 3)},
                      "findings_only": {"intent_accuracy": round(len(by_intent.get("why_slow", [])) / len(alone), 3)}},
    }
    if chars:
        lines = [r["lines"] for r in rows if r["lines"] is not None]
        metrics |= {"answer_chars_mean": round(float(np.mean(chars)), 1),
                    "answer_chars_p95": round(float(np.percentile(chars, 95)), 1),
                    "answer_lines_mean": round(float(np.mean(lines)), 2), "answer_lines_max": max(lines),
                    "answered": round(sum(bool(r["answered"]) for r in rows) / len(rows), 3)}
    cases = tuple(CaseResult(f"{r['conversation']}#{r['turn']}" if r["conversation"] else f"{r['expected']}: {r['q']}",
                             r["passed"], r) for r in rows)
    return SuiteResult(SUITE, metrics, cases)


def run_questions(cases: Sequence[Case], settings: Settings, *, llm: str = "offline", base_url: str | None = None,
                  progress: Progress | None = None, path: Path = SUITE_FILE) -> SuiteResult:
    """Asks the suite of the offline agent over the example and scores it. ``cases`` are not read (the
    suite's questions are about the example), nor ``llm``: the suite scores the offline planner's intents.

    Raises:
        ConfigError: a bad suite file.
    """
    questions = load_suite(path)
    return score(questions, _offline_answers(questions, settings, progress))
