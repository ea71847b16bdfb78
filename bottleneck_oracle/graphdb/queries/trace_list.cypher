// name: trace_list
// mode: read
// guard: none
// params:
// returns: trace_id, name, status, detail, ranks, steps, ops, relationships, loaded_at
// Every trace in the database, the newest load first, with its load status. A trace whose
// status is not 'complete' is being loaded, or its load stopped half-way: queries about it
// return nothing until the next `oracle ingest` of the same files finishes it.
MATCH (t:Trace)
RETURN t.id AS trace_id, t.name AS name, t.status AS status, t.detail AS detail,
       size(t.ranks) AS ranks, t.steps AS steps, t.ops AS ops, t.relationships AS relationships,
       t.loaded_at AS loaded_at
ORDER BY coalesce(t.loaded_at, 0.0) DESC, trace_id
