// name: trace_finish
// mode: write
// params: trace, steps, ops, relationships, loaded_at
// returns: trace
// Marks a trace loaded: the last write of a load, after every batch committed.
MATCH (t:Trace {id: $trace})
SET t.status = 'complete', t.steps = $steps, t.ops = $ops, t.relationships = $relationships,
    t.loaded_at = $loaded_at
RETURN t.id AS trace
