"""The offline planner's answers about a pipeline job's stragglers (``straggler_report``), in the answer contract:
the report's headline (or the what-if asked, or, for a question that weighs a bad worker against the
pipeline split, the answer from its cause and shares), the what-ifs asked with their intervals, the slowdown
and the shares of the gap, the first fix as the action and ``oracle stragglers PATH --whatif ...`` as the check.
Numbers are the tool's, rounded."""

from __future__ import annotations

import shlex
from typing import Any

from bottleneck_oracle.agent.answer_text import template
from bottleneck_oracle.agent.intents import Slots
from bottleneck_oracle.agent.reply import Evidence, Reply

__all__ = ["stragglers_reply"]

TRUSTED_RESIDUAL = 0.05  # a replay that misses the recorded steps by more is not trusted highly
SAME_PCT = 0.1  # a what-if that moves the step time less than this (%) changes nothing


def _secs(x: float) -> str:
    """Seconds as ``oracle stragglers`` writes them: three decimals, four digits below a tenth of a second."""
    return f"{x:.3f}" if abs(x) >= 0.1 else f"{x:.4g}"


def _part(x: float) -> str:
    """A share of the slowdown's gap, two decimals (never "-0.00")."""
    text = f"{x:.2f}"
    return "0.00" if text == "-0.00" else text


def _workers(workers: list[dict[str, Any]]) -> str:
    return ", ".join(f"rank {w['rank']} (dp_rank {w['dp_rank']}, stage {w['stage']})" for w in workers) or "none"


def _fix_edit(r: dict[str, Any], fix: dict[str, Any]) -> str:
    """The edit that predicts ``fix``, as ``oracle stragglers --whatif`` takes it."""
    if r["cause"] == "unexplained":
        return "fix straggler_rank"  # every op at its type's typical time
    if fix["cause"] == "slow_worker":
        return "fix straggler_rank rank=" + ",".join(str(w["rank"]) for w in fix.get("workers", []))
    if fix["cause"] == "stage_imbalance":  # a layer to the lightest stage; L: the layers each stage holds
        return f"move_layer {fix.get('stage')}->{list(r['by_stage'])[-1]} layers=L"
    return "even_microbatches"


def _pipeline_check(r: dict[str, Any], slots: Slots) -> str:
    """``oracle stragglers PATH --whatif ...``: the what-ifs asked, else the edit that predicts the first fix."""
    edits = ["; ".join(w["edits"]) for w in r["whatif"]]
    if slots.stage_move is not None and not slots.layers:  # the move asked, its layers for the user to give
        edits.append(f"move_layer {slots.stage_move[0]}->{slots.stage_move[1]} layers=L")
    if not edits and r["fixes"]:
        edits = [_fix_edit(r, r["fixes"][0])]
    return template("check_stragglers", pipeline=shlex.quote(str(r.get("pipeline") or r["job"]["source"])),
                    whatif="".join(f" --whatif {shlex.quote(e)}" for e in edits))


def _pipeline_whatifs(r: dict[str, Any], base: str) -> list[Evidence]:
    """Each what-if asked of the pipeline job: its step time against ``base`` with its interval, and what it assumes."""
    out = []
    for w in r["whatif"]:
        if abs(w["saving_pct"]) < SAME_PCT:
            change = template("stragglers_same", saving_pct=abs(w["saving_pct"]))
        elif w["saving_s"] > 0:
            change = template("stragglers_saves", saving_s=_secs(w["saving_s"]), saving_pct=w["saving_pct"])
        else:
            change = template("stragglers_costs", cost_s=_secs(-w["saving_s"]), cost_pct=abs(w["saving_pct"]))
        lo, hi = w["interval_s"]
        out.append(Evidence(template("stragglers_whatif", edits="; ".join(w["edits"]), base_s=base, change=change,
                                     predicted_s=_secs(w["predicted_step_s"]), lo_s=_secs(lo), hi_s=_secs(hi),
                                     assumptions="; ".join(w["assumptions"])), "straggler_report"))
    return out


def _pipeline_confidence(r: dict[str, Any]) -> str:
    """High when the first fix's interval stays under today's step and the replay reproduces the recorded steps."""
    fix, residual = r["fixes"][0], r["replay_residual"]
    if fix["interval_s"][1] < r["step_time_s"]["no_launch_gaps"] and residual <= TRUSTED_RESIDUAL:
        return template("stragglers_confidence_high", source=fix["source"])
    return template("stragglers_confidence_medium", source=fix["source"],
                    why="the replay misses the recorded steps" if residual > TRUSTED_RESIDUAL
                    else "the interval reaches the step time recorded")


def stragglers_reply(r: dict[str, Any], slots: Slots) -> Reply:
    """Who holds a pipeline job back (``straggler_report``): its headline, or which of a bad worker and the
    pipeline split it is when the question weighs them, then the what-ifs asked, the slowdown, the shares of the
    gap and the leading attribution; the first fix as the action."""
    t, fixes, tool = r["step_time_s"], r["fixes"], "straggler_report"
    base = _secs(t["no_launch_gaps"])
    shares = {"mw": _part(r["worker_share"]), "ms": _part(r["stage_share"]), "stage": r["worst_stage"],
              "stage_share": _part(r["shares"]["worst_stage"]["removed"]), "work_share": _part(r["work_share"]),
              "workers": _workers(r["shares"]["worker"]["workers"]), "slowdown": f"{r['slowdown']:.3f}",
              "base_s": base}
    verdict = r["headline"]
    if slots.either:
        best = _secs(fixes[0]["predicted_step_s"]) if fixes else base
        verdict = template(f"stragglers_either_{r['cause']}", headline=r["headline"], best_s=best, **shares)
    evidence: list[Evidence] = []
    if slots.stage_move is not None and not slots.layers:
        evidence.append(Evidence(template("stragglers_layers", src=slots.stage_move[0], dst=slots.stage_move[1]), tool))
    asked = _pipeline_whatifs(r, base)
    if asked and not slots.either:  # the what-if asked answers the question: it leads, the job's verdict follows
        verdict, asked = asked[0].text, [Evidence(r["headline"], tool), *asked[1:]]
    evidence += asked
    (dp, dp_s), (stage, stage_s), (op, op_s) = (next(iter(r[k].items())) for k in ("by_dp_rank", "by_stage",
                                                                                  "by_op_type"))
    evidence += [Evidence(template("stragglers_times", recorded_s=_secs(t["recorded"]), ideal_s=_secs(t["ideal"]),
                                   **shares), tool),
                 Evidence(template("stragglers_shares", **shares), tool),
                 Evidence(template("stragglers_leading", dp_rank=dp, dp_s=f"{dp_s:.3f}", stage=stage,
                                   stage_s=f"{stage_s:.3f}", op_type=op, op_s=f"{op_s:.3f}"), tool)]
    evidence += [Evidence(template("stragglers_also", text=line.removeprefix("also: ")), tool)
                 for line in r["explanation"] if line.startswith("also: ")]
    numbers = [{"predicted_s": _secs(f["predicted_step_s"]), "lo_s": _secs(f["interval_s"][0]), "base_s": base,
                "hi_s": _secs(f["interval_s"][1]), "saving_s": _secs(f["saving_s"]), "saving_pct": f["saving_pct"],
                "action": f["action"]} for f in fixes]
    evidence += [Evidence(template("stragglers_next", **n), tool) for n in numbers[1:]]
    if not fixes:
        return Reply(verdict, evidence, check=_pipeline_check(r, slots))
    return Reply(verdict, evidence, action=template("stragglers_action", **numbers[0]),
                 confidence=_pipeline_confidence(r), check=_pipeline_check(r, slots))
