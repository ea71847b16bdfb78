"""The root-cause suite: every question of every case asked of the agent, scored so that it cannot
be gamed, beside two baselines scored by the same function on the same cases.

An answer is correct only when its category, its step, its rank (where the cause is on one rank)
and at least one culprit op (in the cause's ops or the answer's text) are all right; on a clean
case, only when it names no cause. The **blind floor** answers without reading the trace (the set's
most frequent category, its highest step number, no rank, no op); **findings-only** answers with
the analysis's top major finding (``oracle analyze``, no agent).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bottleneck_oracle.agent.conversation import Answer, Conversation
from bottleneck_oracle.agent.offline import turn, turn_results
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ModelError, one_line
from bottleneck_oracle.evals.types import Case, CaseResult, Expect, SuiteResult
from bottleneck_oracle.findings.finding import MAJOR
from bottleneck_oracle.vocabulary import Bottleneck
from bottleneck_oracle.workspace.traces import open_trace

__all__ = ["Claim", "blind_claim", "claim_of_answer", "findings_claim", "run_rootcause", "score", "score_claims"]

NONE = Bottleneck.NONE.value
TOP_K = 3


@dataclass(frozen=True, slots=True)
class Claim:
    """What one answer says: its cause, where, which ops, its text, and its next-best categories.

    Args:
        top: the categories it ranks first (the cause's first), for top-3 accuracy.
    """

    category: str
    step: int | None
    ranks: tuple[int, ...] = ()
    ops: tuple[str, ...] = ()
    text: str = ""
    top: tuple[str, ...] = ()


def score(expect: Expect, claim: Claim) -> dict[str, Any]:
    """The verdict on one claim: each part right or not, ``wrong`` the parts that are not, and
    ``correct`` (every part right; for a clean case: no cause claimed)."""
    if expect.category == NONE:
        ok = claim.category == NONE
        return {"correct": ok, "category": ok, "step": True, "rank": True, "op": True, "top3": ok,
                "wrong": [] if ok else ["category"]}
    parts = {
        "category": claim.category == expect.category,
        "step": claim.step == expect.step,
        "rank": len(expect.ranks) != 1 or expect.ranks[0] in claim.ranks,
        "op": any(op in claim.ops or op in claim.text for op in expect.ops),
    }
    top = claim.top or (claim.category,)
    return {"correct": all(parts.values()), **parts, "top3": expect.category in top[:TOP_K],
            "wrong": [k for k, v in parts.items() if not v]}


def _share(hits: Sequence[bool]) -> float | None:
    return round(sum(hits) / len(hits), 4) if hits else None


def score_claims(rows: Sequence[tuple[Expect, Claim]]) -> dict[str, Any]:
    """The suite's metrics over (truth, claim) pairs, one per question (see the module docstring)."""
    verdicts = [(e, c, score(e, c)) for e, c in rows]
    faulty = [(e, c, v) for e, c, v in verdicts if e.category != NONE]
    clean = [(e, c, v) for e, c, v in verdicts if e.category == NONE]
    claimed = [v for e, c, v in verdicts if c.category != NONE]
    per_category: dict[str, list[bool]] = {}
    for e, _, v in verdicts:
        per_category.setdefault(e.category, []).append(v["correct"])
    return {
        "top1_accuracy": _share([v["correct"] for *_, v in verdicts]),
        "top3_accuracy": _share([v["top3"] for *_, v in verdicts]),
        "localization": _share([v["step"] and v["rank"] for *_, v in faulty]),
        "op_recall": _share([v["op"] for *_, v in faulty]),
        "precision": _share([v["correct"] for v in claimed]),
        "false_positive_rate": _share([c.category != NONE for _, c, _ in clean]),
        "n_questions": len(verdicts),
        "per_category": {k: _share(v) for k, v in sorted(per_category.items())},
    }


def claim_of_answer(answer: Answer, explained: dict[str, Any] | None) -> Claim:
    """The agent's claim: its cause (category, ranks, ops) and step, the answer's text, and the
    categories of the major findings ``explain_step`` returned for that step, the cause's first."""
    cause = answer.cause or {}
    category = cause.get("category") or NONE
    top = [category]
    if explained is not None and category != NONE:
        top += [f["category"] for f in explained.get("findings", [])
                if f["severity"] == MAJOR and f["step"] in (explained.get("step"), None)]
    return Claim(category, answer.step, tuple(cause.get("ranks") or ()), tuple(cause.get("ops") or ()),
                 answer.answer, tuple(dict.fromkeys(top)))


def blind_claim(cases: Sequence[Case]) -> Claim:
    """An answer made without reading any trace: the most frequent category of the set (ties: the
    vocabulary's order), the highest step number its questions or truths mention, no rank, no op."""
    order = {b.value: i for i, b in enumerate(Bottleneck)}
    counts = Counter(c.expect.category for c in cases)
    ranked = sorted(counts, key=lambda k: (-counts[k], order.get(k, len(order))))
    steps = [c.expect.step for c in cases if c.expect.step is not None]
    steps += [int(w) for c in cases for q in c.questions for w in q.replace("?", " ").replace(".", " ").split()
              if w.isdigit()]
    return Claim(ranked[0], max(steps) if steps else None, top=tuple(ranked[:TOP_K]))


def findings_claim(case: Case, settings: Settings) -> Claim:
    """The analysis's top major finding of the case's trace, or the cause of its step (``findings/cause.py``)
    where one is marked (no agent, the question unread)."""
    analysis = open_trace(case.trace, settings).analysis
    major = [f for f in analysis.findings if f.severity == MAJOR]
    if not major:
        return Claim(NONE, None, top=(NONE,))
    f = (analysis.cause(major[0].step) if major[0].step is not None else None) or major[0]
    return Claim(f.category.value, f.step, tuple(f.ranks), tuple(f.ops), f.evidence,
                 tuple(dict.fromkeys(g.category.value for g in major)))


def _explained(conversation: Conversation) -> dict[str, Any] | None:
    """The last successful ``explain_step`` result of the conversation's latest turn."""
    state = conversation.agent.get_state({"configurable": {"thread_id": conversation.thread}}).values
    results = turn_results(turn(state.get("messages", []))[1])
    return next((r.data for r in reversed(results) if r.name == "explain_step" and r.ok), None)


def _ask(case: Case, settings: Settings, llm: str, base_url: str | None,
         tick: Callable[[], None]) -> list[dict[str, Any]]:
    """Each question of ``case``, asked in a fresh thread of one conversation."""
    rows = []
    with Conversation(settings, trace=str(case.trace), llm=llm, base_url=base_url) as conversation:
        conversation.context.resolve()  # the trace loaded first: latency is the question's, not the ingest's
        for question in case.questions:
            conversation.reset()
            start, error = time.perf_counter(), None
            answer: Answer | None = None
            try:
                answer = conversation.ask(question)
                claim = claim_of_answer(answer, _explained(conversation))
            except ModelError as e:  # counted as unanswered; the suite goes on
                claim, error = Claim(NONE, None), one_line(e)
            row: dict[str, Any] = {"question": question, "claim": claim, "answered": bool(answer and answer.answered),
                                   "grounded": bool(answer and answer.grounded),
                                   "ungrounded_numbers": list(answer.ungrounded_numbers) if answer else [],
                                   "seconds": answer.seconds if answer else round(time.perf_counter() - start, 3),
                                   "tool_calls": [{k: c[k] for k in ("name", "ms", "ok")} for c in answer.tool_calls]
                                   if answer else [], "answer": answer.answer if answer else ""}
            if error is not None:
                row["error"] = error
            rows.append(row)
            tick()
    return rows


def _got(claim: Claim) -> dict[str, Any]:
    return {"category": claim.category, "step": claim.step, "ranks": list(claim.ranks), "ops": list(claim.ops)}


def run_rootcause(cases: Sequence[Case], settings: Settings, *, llm: str = "offline", base_url: str | None = None,
                  progress: Callable[[int, int], None] | None = None) -> SuiteResult:
    """Asks every question of every case and scores the answers, with both baselines.

    Returns:
        The ``rootcause`` suite: metrics (see ``score_claims``, plus ``groundedness``, ``answered``,
        ``n_cases``, ``seconds`` and ``baselines`` ``blind_floor`` and ``findings_only``) and one row
        per case: its questions, what was expected, what each answer got and which parts were wrong.

    Raises:
        ConfigError, TraceFormatError: a case's trace cannot be read.
    """
    total, done = sum(len(c.questions) for c in cases), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    start = time.perf_counter()
    blind = blind_claim(cases)
    agent_rows, blind_rows, findings_rows, results = [], [], [], []
    for case in cases:
        asked = _ask(case, settings, llm, base_url, tick)
        found = findings_claim(case, settings)
        e = case.expect
        expected = {"category": e.category, "step": e.step, "ranks": list(e.ranks), "ops": list(e.ops)}
        questions = []
        for row in asked:
            verdict = score(case.expect, row["claim"])
            agent_rows.append((case.expect, row["claim"]))
            blind_rows.append((case.expect, blind))
            findings_rows.append((case.expect, found))
            questions.append({**{k: v for k, v in row.items() if k != "claim"}, "got": _got(row["claim"]),
                              "top": list(row["claim"].top), "correct": verdict["correct"],
                              "wrong": verdict["wrong"]})
        first = next((q for q in questions if not q["correct"]), questions[0]) if questions else {}
        results.append(CaseResult(case.id, all(q["correct"] for q in questions), {
            "question": first.get("question"), "expected": expected, "got": first.get("got"),
            "wrong": first.get("wrong", []), "questions": questions,
            "findings_only": {"got": _got(found), "correct": score(case.expect, found)["correct"]}}))
    asked_rows = [q for r in results for q in r.details["questions"]]
    metrics = score_claims(agent_rows) | {
        "groundedness": _share([q["grounded"] for q in asked_rows]),
        "answered": _share([q["answered"] for q in asked_rows]),
        "n_cases": len(cases), "seconds": round(time.perf_counter() - start, 1),
        "baselines": {"blind_floor": score_claims(blind_rows) | {"n_cases": len(cases), "answer": _got(blind)},
                      "findings_only": score_claims(findings_rows) | {"n_cases": len(cases)}},
    }
    return SuiteResult("rootcause", metrics, tuple(results))
