"""The retrieval suite: does the context the agent is given for a slow step, the critical subgraph read
from the graph database and condensed to a token budget, name at least one of the case's culprit ops?

The ops looked at are those the condensed context holds: its critical path's ops, its collectives'
ops and its findings' ops (``retrieval/context.py``). Clean cases have no culprit and are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.types import Case, CaseResult, SuiteResult
from bottleneck_oracle.graphdb import GraphStore, open_store
from bottleneck_oracle.retrieval import condense, critical_subgraph
from bottleneck_oracle.vocabulary import Bottleneck
from bottleneck_oracle.workspace.loaded import loaded_trace
from bottleneck_oracle.workspace.steps import pick_step

__all__ = ["BUDGET_TOKENS", "SUITE", "context_ops", "run_retrieval"]

SUITE = "retrieval"
BUDGET_TOKENS = 1500  # what the agent's explain tool condenses to
Progress = Callable[[int, int], None]  # (cases done, cases)


def context_ops(ctx: dict[str, Any]) -> set[str]:
    """Every op name a condensed context holds: on its path, in its collectives, in its findings."""
    names = {str(o["name"]) for g in ctx.get("path", []) for o in g["ops"]}
    names |= {str(c["op"]) for c in ctx.get("collectives", []) if c.get("op")}
    names |= {str(op) for f in ctx.get("findings", []) for op in f.get("ops", [])}
    return names


def _retrieve(store: GraphStore, case: Case, settings: Settings, budget_tokens: int) -> CaseResult:
    t = loaded_trace(store, str(case.trace), settings)
    expect = case.expect
    step, rank = pick_step(store, t, expect.step, expect.ranks[0] if expect.ranks else None)
    ctx = condense(critical_subgraph(store, t.trace_id, step, rank), budget_tokens=budget_tokens)
    found = context_ops(ctx)
    hits = sorted(op for op in expect.ops if op in found)
    details = {"trace_id": t.trace_id, "step": step, "rank": rank, "culprits": list(expect.ops), "found": hits,
               "culprit_found": bool(hits), "ops_in_context": len(found), "tokens": ctx["tokens"],
               "budget_tokens": budget_tokens, "within_budget": bool(ctx["within_budget"]),
               "dropped": ctx["dropped"]}
    if not hits:
        details["why"] = f"none of {len(expect.ops)} culprit ops is among the {len(found)} ops of the context"
    return CaseResult(case.id, bool(hits) and details["within_budget"], details)


def _share(rows: list[CaseResult], key: str) -> float | None:
    values = [bool(r.details[key]) for r in rows if key in r.details]
    return round(sum(values) / len(values), 4) if values else None


def run_retrieval(cases: list[Case], settings: Settings, *, llm: str = "offline", base_url: str | None = None,
                  progress: Progress | None = None, budget_tokens: int = BUDGET_TOKENS) -> SuiteResult:
    """Each faulty case's trace loaded into the graph database (the embedded one started when needed),
    its step's critical subgraph on the case's rank (else the step's slowest) retrieved and condensed.

    ``llm`` and ``base_url`` are unused: retrieval needs no chat model.

    Returns:
        ``SuiteResult("retrieval", metrics, rows)`` with metrics ``{"culprit_recall": share of cases
        whose context names a culprit op, "within_budget": share whose context fits ``budget_tokens``,
        "tokens_mean", "tokens_max": tokens of the contexts, "n": cases scored, "skipped_clean": clean
        cases}`` (None when no case was scored); one row per faulty case with ``step, rank, culprits,
        found, culprit_found, ops_in_context, tokens, budget_tokens, within_budget, dropped``.
    """
    faulty = [c for c in cases if c.expect.category != Bottleneck.NONE]
    rows: list[CaseResult] = []
    with open_store(settings, start=True) as store:
        for i, case in enumerate(faulty):
            try:
                rows.append(_retrieve(store, case, settings, budget_tokens))
            except ConfigError as e:  # a step or rank the trace lacks: the case fails, the suite goes on
                rows.append(CaseResult(case.id, False, {"culprit_found": False, "error": str(e)}))
            if progress:
                progress(i + 1, len(faulty))
    tokens = [r.details["tokens"] for r in rows if "tokens" in r.details]
    metrics = {
        "culprit_recall": _share(rows, "culprit_found"),
        "within_budget": _share(rows, "within_budget"),
        "tokens_mean": round(float(np.mean(tokens)), 1) if tokens else None,
        "tokens_max": max(tokens) if tokens else None,
        "n": len(rows),
        "skipped_clean": len(cases) - len(faulty),
    }
    return SuiteResult(SUITE, metrics, tuple(rows))
