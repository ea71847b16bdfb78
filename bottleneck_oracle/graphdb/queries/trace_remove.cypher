// name: trace_remove
// mode: write
// params: trace
// returns: removed
// Removes the Trace node itself, once delete_trace_nodes has removed everything it held.
MATCH (t:Trace {id: $trace})
DETACH DELETE t
RETURN count(*) AS removed
