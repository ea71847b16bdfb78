// name: ops_by_name
// mode: read
// guard: trace
// params: trace, pattern, limit
// returns: key, idx, name, kind, rank, step, ts_us, dur_us, slack_us, on_path, contrib_us
// The ops of a trace whose name contains a pattern (case-insensitive substring, not a regular
// expression: FalkorDB has no =~), longest first.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
MATCH (o:Op {trace: $trace}) WHERE toLower(o.name) CONTAINS toLower($pattern)
RETURN o.key AS key, o.idx AS idx, o.name AS name, o.kind AS kind, o.rank AS rank, o.step AS step,
       o.ts_us AS ts_us, o.dur_us AS dur_us, o.slack_us AS slack_us, o.on_path AS on_path,
       o.contrib_us AS contrib_us
ORDER BY dur_us DESC, idx
LIMIT $limit
