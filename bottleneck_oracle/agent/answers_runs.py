"""The offline planner's answer to two runs compared ("why is run A slower than run B?", "did my change
help?"), from the ``compare_runs`` tool (``oracle diff``'s comparison): the verdict first (which run is
slower or faster, by how much, its interval and confidence), then the cause, what moved, the findings that
appeared or went away, the comparability, what bounds each run and the what-if's check."""

from __future__ import annotations

from typing import Any

from bottleneck_oracle.agent.answer_text import rank_list, signed
from bottleneck_oracle.agent.reply import Evidence, Reply
from bottleneck_oracle.prompts import load_yaml

__all__ = ["compare_runs_reply"]

_TOOL = "compare_runs"


def _t(key: str, /, **values: Any) -> str:
    return " ".join(str(load_yaml("answers_runs")[key]).split()).format(**values)


def _verdict(c: dict[str, Any]) -> str:
    lo, hi = c["interval_pct"]
    sure = (_t("sure", lo=f"{lo:+g}%", hi=f"{hi:+g}%", confidence=c["confidence_pct"])
            if c["confidence"] is not None else _t("sure_none"))
    values = c | {"size": abs(c["delta_ms"]), "pct": f"{c['delta_pct']:+g}%", "sure": sure}
    return _t("verdict_unchanged" if c["verdict"] == "unchanged" else "verdict", **values)


def _whatif_values(c: dict[str, Any], w: dict[str, Any]) -> dict[str, Any]:
    return w | {"slow": c[w["applied_to"]], "fast": c[w["predicts"]], "error": f"{w['error_pct']:+g}%"}


def _cause(c: dict[str, Any]) -> tuple[list[Evidence], bool]:
    """The cause's line, with the what-if when its edit fixes the cause's finding; and whether it took it."""
    cause, w = c.get("cause"), c.get("whatif")
    if not cause:
        return [], False
    if w and cause["finding"] and w["edit"] == f"fix {cause['finding']}":
        return [Evidence(_t("cause_whatif", words=cause["words"], **_whatif_values(c, w)), _TOOL)], True
    return [Evidence(_t("cause", words=cause["words"]), _TOOL)], False


def _moved(c: dict[str, Any]) -> Evidence:
    top = c["moved"]
    categories = ", ".join(f"{m['category']} {signed(m['delta_ms'])}" for m in top["categories"]) or "nothing"
    ops = ", ".join(f"'{o['op']}' {signed(o['delta_ms'])}" for o in top["ops"])
    return Evidence(_t("moved", categories=categories, ops=ops) if ops else _t("moved_no_ops", categories=categories),
                    _TOOL)


def _findings(c: dict[str, Any]) -> list[Evidence]:
    """The findings that moved, the cause's own left to the cause's line."""
    cause = c.get("cause") or {}
    others = [f for f in c["moved"]["findings"]
              if (f["category"], f["ranks"]) != (cause.get("finding"), cause.get("ranks"))]
    if not others:
        return []
    named = "; ".join(_t("finding", **f | {"ranks": rank_list(f["ranks"])}) for f in others)
    return [Evidence(_t("findings", findings=named), _TOOL)]


def _runs(c: dict[str, Any]) -> list[Evidence]:
    """What bounds each run, the one asked about (NEW) first."""
    shown = []
    for side in ("new", "base"):
        v = c.get(f"{side}_verdict")
        if v:
            gpu = _t("run_gpu", busy=v["gpu_busy_pct"]) if v["gpu_busy_pct"] is not None else _t("run_no_gpu")
            shown.append(_t("run", name=c[side], verdict=v["verdict"], gpu=gpu))
    return [Evidence(_t("runs", runs="; ".join(shown)), _TOOL)] if shown else []


def compare_runs_reply(c: dict[str, Any]) -> Reply:
    """The answer from the ``compare_runs`` tool's result ``c`` (``workspace/diff.py Compared.brief``)."""
    comp = c["comparability"]
    evidence, told_whatif = _cause(c)
    evidence += [_moved(c), *_findings(c),
                 Evidence(_t("comparability", level=comp["level"],
                             reasons=f": {'; '.join(comp['reasons'])}" if comp["reasons"] else ""), _TOOL),
                 *_runs(c)]
    w = c.get("whatif")
    if w and not told_whatif:
        evidence.append(Evidence(_t("whatif", **_whatif_values(c, w)), _TOOL))
    return Reply(_verdict(c), evidence, check=_t("check", base=c["base"], new=c["new"]))
