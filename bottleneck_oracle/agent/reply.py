"""The answer contract every answer follows, offline or from a model, in the CLI, MCP and the page:
the verdict with its number first, at most five evidence lines each naming the tool its numbers came
from, then what to do (with its predicted saving and how sure that prediction is) and the command
that checks it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_EVIDENCE", "Evidence", "Reply", "parse_reply"]

MAX_EVIDENCE = 5


@dataclass(frozen=True, slots=True)
class Evidence:
    """One line of evidence and the tool whose result holds its numbers."""

    text: str
    tool: str


@dataclass(slots=True)
class Reply:
    """An answer in the contract's fields. ``details`` holds what the short answer leaves out
    (printed with ``--verbose``)."""

    verdict: str
    evidence: list[Evidence] = field(default_factory=list)
    action: str | None = None
    confidence: str | None = None
    check: str | None = None
    details: list[str] = field(default_factory=list)

    def render(self, verbose: bool = False) -> str:
        """The answer as a person reads it: one screen by default, everything with ``verbose``."""
        shown = self.evidence if verbose else self.evidence[:MAX_EVIDENCE]
        lines = [self.verdict, *(f"- {e.text} [{e.tool}]" for e in shown)]
        if self.action:
            lines.append(f"Do: {self.action}" + (f" (confidence: {self.confidence})" if self.confidence else ""))
        if self.check:
            lines.append(f"Check: {self.check}")
        if verbose:
            lines += self.details
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "evidence": [{"text": e.text, "tool": e.tool} for e in self.evidence],
                "action": self.action, "confidence": self.confidence, "check": self.check}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Reply:
        return cls(doc["verdict"], [Evidence(e["text"], e["tool"]) for e in doc.get("evidence", [])],
                   doc.get("action"), doc.get("confidence"), doc.get("check"), list(doc.get("details", [])))


_EVIDENCE = re.compile(r"^[-*•]\s+(.*?)(?:\s+\[([\w.]+)\])?\s*$")
_DO = re.compile(r"^Do:\s*(.*?)(?:\s+\(confidence:\s*(.*)\))?\s*$")


def parse_reply(text: str) -> Reply:
    """A written answer (a model's) read back into the contract's fields: the first line is the
    verdict, ``- text [tool]`` lines the evidence, ``Do:`` and ``Check:`` lines the action and the
    check; any other line is a detail."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    reply = Reply(lines[0] if lines else "")
    for line in lines[1:]:
        if (m := _EVIDENCE.match(line)) is not None:
            reply.evidence.append(Evidence(m.group(1), m.group(2) or ""))
        elif (m := _DO.match(line)) is not None:
            reply.action, reply.confidence = m.group(1), m.group(2)
        elif line.startswith("Check:"):
            reply.check = line.removeprefix("Check:").strip()
        else:
            reply.details.append(line)
    return reply
