// name: top_critical_ops
// mode: read
// guard: trace
// params: trace, step, rank, k
// returns: key, idx, name, kind, rank, dur_us, contrib_us, segments
// The k ops that contribute most to one (step, rank)'s critical path: contrib_us is the time of
// the step's wall time the op accounts for (all its segments on the path), largest first.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
WITH $trace + ':' + toString($step) + ':' + toString($rank) AS path
MATCH ()-[c:CRITICAL_NEXT {path: path}]->(o)
WHERE NOT c.gap
WITH o, sum(c.contrib_us) AS contrib_us, count(c) AS segments
RETURN o.key AS key, o.idx AS idx, o.name AS name, o.kind AS kind, o.rank AS rank, o.dur_us AS dur_us,
       contrib_us, segments
ORDER BY contrib_us DESC, idx
LIMIT $k
