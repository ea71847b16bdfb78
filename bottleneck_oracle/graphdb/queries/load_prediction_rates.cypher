// name: load_prediction_rates
// mode: write
// params: trace, key, op, criticality
// returns: created
// Adds one batch of per-op criticality ratings (0..1) to a prediction; ops not loaded are skipped.
MATCH (p:Prediction {key: $key})
UNWIND range(0, size($op) - 1) AS i
WITH p, i, $trace + ':' + toString($op[i]) AS op_key
MATCH (o:Op {key: op_key})
CREATE (p)-[:RATES {criticality: $criticality[i]}]->(o)
RETURN count(*) AS created
