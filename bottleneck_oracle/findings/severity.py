"""The rule every finding obeys: it never claims more than its step lost.

A finding tied to a step claims at most what that step took beyond the median of
its rank's other steps (``compare_steps``, the slow-step comparison), on the
finding's ranks or on the ranks that waited for it. It is major when that step is
slow there; an anomaly of a step that is not slow is kept as minor, so it is never
mixed with the causes of a slow step. A rank with fewer than three complete steps
has no median: there a finding stands on its own evidence, major, capped by the
step's wall time. Findings of no step (chronic shares of most steps) pass as they are.
"""

from __future__ import annotations

from dataclasses import replace

from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.findings.finding import MAJOR, MIN_NS, MINOR, Finding, ms
from bottleneck_oracle.findings.slow_steps import compare_steps

__all__ = ["bound_findings"]


def bound_findings(findings: list[Finding], reports: list[StepReport]) -> list[Finding]:
    """``findings`` with each step finding's impact capped and its severity set; dropped when
    its step is on none of the reports (a partial step) or when under 1 ms is left of it.

    Args:
        reports: the complete steps the findings were made from.
    """
    wall = {(r.step, r.rank): r.wall_ns for r in reports}
    peers = {(s.step, s.rank): (s, slow) for s, slow in compare_steps(reports)}
    out = []
    for f in findings:
        if f.step is None:
            out.append(f)
            continue
        where = [(f.step, r) for r in dict.fromkeys(f.ranks + f.waiting) if (f.step, r) in wall]
        if not where:
            continue
        # per rank: the step's excess over its peers' median, or its whole wall where there is no median
        cap_ns = {w: peers[w][0].excess_ns if w in peers else wall[w] for w in where}
        at = max(where, key=cap_ns.__getitem__)
        impact = min(f.impact_ms, ms(max(cap_ns[at], 0)))
        if impact < ms(MIN_NS):
            continue
        major = any(w not in peers or peers[w][1] for w in where)
        evidence = f.evidence
        if impact < f.impact_ms:
            evidence += (f"; capped at {impact} ms, what rank {at[1]}'s step took beyond its median" if at in peers
                         else f"; capped at the step's {impact} ms wall time")
        out.append(replace(f, impact_ms=impact, evidence=evidence, severity=MAJOR if major else MINOR))
    return out
