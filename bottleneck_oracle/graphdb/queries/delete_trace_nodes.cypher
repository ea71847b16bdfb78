// name: delete_trace_nodes
// mode: write
// template: LABEL
// params: trace, limit
// returns: deleted
// Deletes up to `limit` nodes of one label that belong to a trace, with their relationships;
// the loader repeats it until nothing is left (one bounded transaction at a time).
MATCH (n:{LABEL} {trace: $trace})
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
