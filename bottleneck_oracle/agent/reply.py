"""The answer contract every answer follows, offline or from a model, in the CLI, MCP and the page:
the verdict with its number first, at most five evidence lines each naming the tool its numbers came
from, then what to do (with its predicted saving and how sure that prediction is) and the command
that checks it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_EVIDENCE", "Evidence", "Reply"]

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
