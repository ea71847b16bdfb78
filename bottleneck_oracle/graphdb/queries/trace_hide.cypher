// name: trace_hide
// mode: write
// params: trace
// returns: trace
// Hides a trace from every query (status 'deleting') before its content is deleted.
MATCH (t:Trace {id: $trace})
SET t.status = 'deleting'
RETURN t.id AS trace
