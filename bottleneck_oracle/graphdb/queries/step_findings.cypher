// name: step_findings
// mode: read
// guard: trace
// params: trace, step
// returns: idx, category, step, ranks, ops, impact_ms, evidence, severity, cause, waiting, waited_ms
// The findings that explain a step on any rank, largest impact first: those of the step and the
// chronic ones (step null) of its ranks, with the ops and the numbers as evidence; `minor`
// ones are anomalies of a step that is not slow, never its cause. `cause`: the step's cause
// (findings/cause.py: what delayed it, on the rank that did), with the ranks that waited and how long.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
MATCH (f:Finding)-[:EXPLAINS]->(s:Step {trace: $trace, step: $step})
WITH DISTINCT f
RETURN f.idx AS idx, f.category AS category, f.step AS step, f.ranks AS ranks, f.ops AS ops,
       f.impact_ms AS impact_ms, f.evidence AS evidence, f.severity AS severity, f.cause AS cause,
       f.waiting AS waiting, f.waited_ms AS waited_ms
ORDER BY idx
