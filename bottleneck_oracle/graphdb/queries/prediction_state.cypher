// name: prediction_state
// mode: read
// guard: trace
// params: trace, model, version
// returns: predictions, oldest
// How many predictions of one model version a complete trace holds, and when the oldest was stored
// (null: none): an ingest of an unchanged trace keeps them while the model is not newer.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
OPTIONAL MATCH (p:Prediction {trace: $trace, model: $model, version: $version})
RETURN count(p) AS predictions, min(p.created_at) AS oldest
