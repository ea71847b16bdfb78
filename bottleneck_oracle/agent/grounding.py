"""The grounding check: every number in an answer must appear in a tool result of the conversation
(as the tool gave it, or rounded to the digits the answer shows) or in a question; and the answer
keeps to the contract (``agent/reply.py``): its first line a verdict with a number, at most five
evidence lines."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["answer_numbers", "contract_problems", "source_numbers", "ungrounded"]

_TOKEN = re.compile(r"[\w.#:+\-/%=]+")
_NUMBER = re.compile(r"[-+]?(\d+(?:\.\d+)?)(?:x|×|%|ms|s|us|µs)?")
_SOURCE = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def answer_numbers(text: str) -> list[str]:
    """The numbers an answer states, as written: tokens that are a number (with a unit or ``x`` or
    ``%`` after it). Digits inside names (``rank0``, ``ProfilerStep#5``, ``gpt_2rank``, ids) are not."""
    out = []
    for token in _TOKEN.findall(text):
        token = token.rstrip(".:;=/")
        match = _NUMBER.fullmatch(token)
        if match:
            out.append(match.group(1))
    return out


def source_numbers(texts: Iterable[str]) -> set[float]:
    """Every number written in ``texts`` (tool results, the question), as absolute values."""
    out: set[float] = set()
    for text in texts:
        for literal in _SOURCE.findall(text):
            try:
                out.add(abs(float(literal)))
            except ValueError:
                continue
    return out


def _shown(value: float, literal: str) -> bool:
    decimals = len(literal.split(".", 1)[1]) if "." in literal else 0
    return round(value, decimals) == float(literal)


def ungrounded(answer: str, sources: Iterable[str]) -> list[str]:
    """The numbers of ``answer`` found in no source (each once, in the order they appear)."""
    known = source_numbers(sources)
    missing: list[str] = []
    for literal in answer_numbers(answer):
        target = float(literal)
        if target in known or any(_shown(v, literal) for v in known):
            continue
        if literal not in missing:
            missing.append(literal)
    return missing


def contract_problems(answer: str, max_evidence: int = 5) -> list[str]:
    """How ``answer`` breaks the answer contract, each as a phrase for the repair note."""
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    if not lines or "cannot" in lines[0].lower() or lines[0].startswith("No "):
        return []  # saying what the traces cannot tell, or that nothing is there, needs no number
    problems = []
    if not answer_numbers(lines[0]):
        problems.append("its first line is not a verdict with a number from a tool result")
    evidence = [line for line in lines[1:] if line.startswith(("- ", "* "))]
    if len(evidence) > max_evidence:
        problems.append(f"it has more than {max_evidence} evidence lines")
    return problems
