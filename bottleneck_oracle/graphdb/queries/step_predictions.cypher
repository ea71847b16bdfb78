// name: step_predictions
// mode: read
// guard: trace
// params: trace, step, rank, k
// returns: model, version, step_ms, wall_ms, top_ops
// What each model predicted for one (step, rank): the step time beside the measured wall time,
// and the k ops it rated most critical (name, key, criticality).
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
WITH $trace + ':' + toString($step) + ':' + toString($rank) AS step_key
MATCH (p:Prediction)-[:PREDICTS]->(s:Step {key: step_key})
OPTIONAL MATCH (p)-[r:RATES]->(o:Op)
WITH p, s, r, o ORDER BY r.criticality DESC, o.idx
WITH p, s, collect({name: o.name, key: o.key, criticality: r.criticality}) AS rated
RETURN p.model AS model, p.version AS version, p.step_ms AS step_ms, s.wall_ms AS wall_ms,
       [x IN rated WHERE x.key IS NOT NULL][0..$k] AS top_ops
ORDER BY model, version
