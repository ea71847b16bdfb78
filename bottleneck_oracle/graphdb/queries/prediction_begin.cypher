// name: prediction_begin
// mode: write
// params: trace, key, step_key, model, version, step, rank, step_ms, created_at
// returns: prediction
// Creates or replaces one model's prediction for one (step, rank): the Prediction node PREDICTS
// the Step, and its earlier per-op ratings are removed (load_prediction_rates adds the new ones).
MATCH (s:Step {key: $step_key})
MERGE (p:Prediction {key: $key})
SET p.trace = $trace, p.model = $model, p.version = $version, p.step = $step, p.rank = $rank,
    p.step_ms = $step_ms, p.created_at = $created_at
MERGE (p)-[:PREDICTS]->(s)
WITH p
OPTIONAL MATCH (p)-[r:RATES]->()
DELETE r
RETURN DISTINCT p.key AS prediction
