// name: critical_path
// mode: read
// guard: trace
// params: trace, step, rank
// returns: pos, name, kind, category, rank, ts_us, dur_us, contrib_us, op_key
// The critical path of one (step, rank), segment by segment in time order, as `oracle analyze
// --json` lists it: the op (or a gap no op covers), its attribution category, the rank it ran
// on, its start as `ts` in its rank's file (µs), its duration and what it contributed to the
// step's wall time. The contributions sum to the step's wall time.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
WITH $trace + ':' + toString($step) + ':' + toString($rank) AS path
MATCH ()-[c:CRITICAL_NEXT {path: path}]->(x)
RETURN c.pos AS pos,
       CASE WHEN c.gap THEN '(no op)' ELSE x.name END AS name,
       CASE WHEN c.gap THEN 'gap' ELSE x.kind END AS kind,
       c.category AS category, c.rank AS rank,
       CASE WHEN c.gap THEN c.ts_us ELSE x.ts_us END AS ts_us,
       CASE WHEN c.gap THEN c.contrib_us ELSE x.dur_us END AS dur_us,
       c.contrib_us AS contrib_us,
       CASE WHEN c.gap THEN null ELSE x.key END AS op_key
ORDER BY pos
