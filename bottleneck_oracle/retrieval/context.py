"""Context assembly: a critical subgraph condensed into a compact, JSON-ready dict within a token budget.

Tokens are estimated as ``ceil(len(json) / 4)`` of the dict's compact JSON (``separators=(",", ":")``),
about what BPE tokenizers give for English and numbers; the estimate is in the result (``tokens``).
When the context is over budget, items go fewest-important first, and ``dropped`` counts them:
minor findings, then the path's ops, the collectives past the 5 latest and the major findings past
the 3 largest (least time on the path, lateness or impact first), then whole op classes and those 5
collectives (least time first: an op class's path time against a collective's lateness), then those
3 major findings (smallest impact first).
The header (the step, its attribution against the median step, the subgraph's edge counts) stays;
when even it is over budget, ``within_budget`` is false. Times are ms, rounded to 3 decimals.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from typing import Any

from bottleneck_oracle.graph.op_classes import OP_CLASSES, classify_strings
from bottleneck_oracle.graph.types import CATEGORIES
from bottleneck_oracle.graphdb.types import Row
from bottleneck_oracle.retrieval.subgraph import Subgraph

__all__ = ["DEFAULT_BUDGET_TOKENS", "condense", "estimate_tokens"]

DEFAULT_BUDGET_TOKENS = 1500
TOP_COLLECTIVES = 5  # collectives kept as long as whole op classes are
TOP_FINDINGS = 3  # major findings kept longer than the path (a job of many ranks has one per rank)
_CHARS_PER_TOKEN = 4
_COMMUNICATION = "communication"


def estimate_tokens(value: Any) -> int:
    """Tokens of ``value`` as an LLM reads it: ``ceil(len(compact JSON) / 4)``."""
    return math.ceil(len(json.dumps(value, separators=(",", ":"))) / _CHARS_PER_TOKEN)


def _ms(value: float | None, scale: float = 1.0) -> float | None:
    return None if value is None else round(float(value) / scale, 3)


def _op_classes(rows: tuple[Row, ...]) -> list[str]:
    """The op class of each row: its name's class (gemm, attention, ...), communication, else its kind."""
    names = tuple(str(r["name"]) for r in rows)
    op, coll, _ = classify_strings(names)
    return [OP_CLASSES[o][0] if o >= 0 else _COMMUNICATION if c >= 0 else str(r["kind"])
            for r, o, c in zip(rows, op.tolist(), coll.tolist())]


def _path(sub: Subgraph) -> list[dict[str, Any]]:
    """The path's top contributors grouped by op class, largest class first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row, op_class in zip(sub.top_ops, _op_classes(sub.top_ops)):
        groups.setdefault(op_class, []).append({"name": row["name"], "rank": row["rank"],
                                                "ms": _ms(row["contrib_us"], 1000.0), "segments": row["segments"]})
    out = [{"op_class": name, "ms": round(sum(o["ms"] for o in ops), 3), "ops": ops} for name, ops in groups.items()]
    return sorted(out, key=lambda g: (-g["ms"], g["op_class"]))


def _attribution(sub: Subgraph) -> tuple[dict[str, Any], float | None]:
    """Per category: the step's ms and the median over the rank's other complete steps; the median wall ms."""
    row = sub.step_row
    peers = [r for r in sub.steps if r["rank"] == sub.rank and r["step"] != sub.step and not r["partial"]]

    def median(column: str) -> float | None:
        values = [float(r[column]) for r in peers if r[column] is not None]
        return _ms(statistics.median(values)) if values else None

    out = {c.value: {"ms": _ms(row[f"{c.value}_ms"] or 0.0), "median_ms": median(f"{c.value}_ms")}
           for c in CATEGORIES}
    return out, median("wall_ms")


def _collectives(sub: Subgraph) -> list[dict[str, Any]]:
    return [{"instance": r["instance"], "kind": r["kind"], "last_rank": r["slowest_rank"], "op": r["op"],
             "late_ms": _ms(r["lateness_us"], 1000.0), "members": r["members"]} for r in sub.collectives]


def _findings(sub: Subgraph) -> list[dict[str, Any]]:
    return [{"category": r["category"], "step": r["step"], "ranks": list(r["ranks"] or []),
             "ops": list(r["ops"] or []), "impact_ms": _ms(r["impact_ms"]), "severity": r["severity"],
             "evidence": r["evidence"]} for r in sub.findings]


def _drop_order(ctx: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every droppable item, fewest-important first (see the module docstring)."""
    tiers: list[tuple[int, float, int, tuple[str, Any]]] = []
    major = sorted((f for f in ctx["findings"] if f["severity"] != "minor"), key=lambda f: -(f["impact_ms"] or 0.0))
    top = {id(f) for f in major[:TOP_FINDINGS]}  # past these, a major finding goes before the path's op classes
    for i, f in enumerate(ctx["findings"]):
        tier = 0 if f["severity"] == "minor" else 3 if id(f) in top else 1
        tiers.append((tier, f["impact_ms"] or 0.0, i, ("findings", id(f))))
    for g in ctx["path"]:
        tiers.append((2, g["ms"], 0, ("op_classes", id(g))))
        tiers += [(1, o["ms"] or 0.0, 0, ("ops", id(o))) for o in g["ops"]]
    # the latest few collectives weigh against whole op classes; the others go with the ops (a step of a
    # job of many ranks joins hundreds, which would otherwise leave no room for the path itself)
    late = sorted(ctx["collectives"], key=lambda c: -abs(c["late_ms"] or 0.0))
    tiers += [(2 if k < TOP_COLLECTIVES else 1, abs(c["late_ms"] or 0.0), 0, ("collectives", id(c)))
              for k, c in enumerate(late)]
    return [item for *_, item in sorted(tiers, key=lambda t: (t[0], t[1], -t[2]))]


def _without(ctx: dict[str, Any], gone: set[int]) -> dict[str, Any]:
    path = [{**g, "ops": [o for o in g["ops"] if id(o) not in gone]} for g in ctx["path"] if id(g) not in gone]
    return {**ctx, "path": path, "collectives": [c for c in ctx["collectives"] if id(c) not in gone],
            "findings": [f for f in ctx["findings"] if id(f) not in gone]}


def _finish(out: dict[str, Any], dropped: Counter[str], budget_tokens: int) -> dict[str, Any]:
    out |= {"dropped": dict(dropped), "tokens": 0, "within_budget": True}
    for _ in range(2):  # the second pass counts the estimate's own digits
        out["tokens"] = estimate_tokens(out)
    out["within_budget"] = out["tokens"] <= budget_tokens
    return out


def _fit(ctx: dict[str, Any], budget_tokens: int) -> dict[str, Any]:
    """``ctx`` with items dropped until its JSON is within ``budget_tokens``."""
    dropped: Counter[str] = Counter({"ops": 0, "op_classes": 0, "collectives": 0, "findings": 0})
    order = _drop_order(ctx)

    def without(k: int) -> dict[str, Any]:  # the first k items of the order dropped
        counts = Counter(dropped)
        counts.update(kind for kind, _ in order[:k])
        return _finish(_without(ctx, {item for _, item in order[:k]}), counts, budget_tokens)

    lo, hi = 0, len(order)  # the fewest items to drop: a search, not a pass per item (thousands on many ranks)
    while lo < hi:
        mid = (lo + hi) // 2
        if without(mid)["within_budget"]:
            hi = mid
        else:
            lo = mid + 1
    return without(lo)


def condense(subgraph: Subgraph, budget_tokens: int = DEFAULT_BUDGET_TOKENS) -> dict[str, Any]:
    """A compact, JSON-ready context of a critical subgraph, within ``budget_tokens`` (estimated
    as ``ceil(len(json) / 4)``; see the module docstring for what is dropped first).

    Returns:
        ``{"trace_id", "step", "rank", "hops", "wall_ms", "median_wall_ms", "critical_path_ms",
        "slow", "attribution": {category: {"ms", "median_ms"}}, "path": [{"op_class", "ms",
        "ops": [{"name", "rank", "ms", "segments"}]}], "collectives": [{"instance", "kind",
        "last_rank", "op", "late_ms", "members"}], "findings": [{"category", "step", "ranks",
        "ops", "impact_ms", "severity", "evidence"}], "subgraph": {"nodes", "on_path", "edges":
        {type: count}}, "dropped": {"ops", "op_classes", "collectives", "findings"},
        "budget_tokens", "tokens", "within_budget"}``; medians are None when the rank has no
        other complete step.

    Raises:
        ValueError: ``budget_tokens`` is not positive.
    """
    if budget_tokens < 1:
        raise ValueError(f"budget_tokens must be positive, not {budget_tokens}")
    row = subgraph.step_row
    attribution, median_wall = _attribution(subgraph)
    ctx: dict[str, Any] = {
        "trace_id": subgraph.trace_id, "step": subgraph.step, "rank": subgraph.rank, "hops": subgraph.hops,
        "wall_ms": _ms(row["wall_ms"]), "median_wall_ms": median_wall, "critical_path_ms": _ms(row["critical_path_ms"]),
        "slow": bool(row["slow"]), "attribution": attribution, "path": _path(subgraph),
        "collectives": _collectives(subgraph), "findings": _findings(subgraph),
        "subgraph": {"nodes": len(subgraph.nodes), "on_path": sum(1 for n in subgraph.nodes if n["on_path"]),
                     "edges": dict(sorted(Counter(str(e["type"]) for e in subgraph.edges).items()))},
        "budget_tokens": int(budget_tokens),
    }
    return _fit(ctx, int(budget_tokens))
