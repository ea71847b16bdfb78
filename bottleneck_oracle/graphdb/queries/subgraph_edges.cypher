// name: subgraph_edges
// mode: read
// guard: trace
// params: trace, keys
// returns: src, type, dst
// The typed DAG edges between the ops whose keys are given (for example a critical subgraph),
// as (src idx, type, dst idx). The key list is bound with WITH once: FalkorDB evaluates a
// parameter list anew on every row that reads it.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
WITH $keys AS keys
UNWIND keys AS key
MATCH (a:Op {key: key})-[r:NEST|THREAD_NEXT|LAUNCH|STREAM_NEXT|SYNC|COLLECTIVE|DATALOAD|FWDBWD|DATA]->(b:Op)
WHERE b.key IN keys
RETURN a.idx AS src, type(r) AS type, b.idx AS dst
ORDER BY src, dst, type
