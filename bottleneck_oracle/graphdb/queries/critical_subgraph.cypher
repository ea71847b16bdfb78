// name: critical_subgraph
// mode: read
// guard: trace
// template: HOPS
// params: trace, step, rank
// returns: key, idx, name, kind, rank, step, ts_us, dur_us, slack_us, on_path, hops
// The critical subgraph of one (step, rank): the ops on its critical path (hops 0) and every op
// within HOPS edges of them along the DAG's typed edges, in either direction, with its distance.
// HOPS is 0 to 3 (a literal: neither dialect takes a parameter as a path length). Only ops have
// DAG edges, so the ends need no label (on FalkorDB a label there costs a scan per row).
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
WITH $trace + ':' + toString($step) + ':' + toString($rank) AS path
MATCH ()-[c:CRITICAL_NEXT {path: path}]->(o)
WHERE NOT c.gap
WITH DISTINCT o
MATCH p = (o)-[:NEST|THREAD_NEXT|LAUNCH|STREAM_NEXT|SYNC|COLLECTIVE|DATALOAD|FWDBWD|DATA*0..{HOPS}]-(n)
WITH n, min(length(p)) AS hops
RETURN n.key AS key, n.idx AS idx, n.name AS name, n.kind AS kind, n.rank AS rank, n.step AS step,
       n.ts_us AS ts_us, n.dur_us AS dur_us, n.slack_us AS slack_us, n.on_path AS on_path, hops
ORDER BY hops, idx
