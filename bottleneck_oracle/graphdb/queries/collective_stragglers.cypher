// name: collective_stragglers
// mode: read
// guard: trace
// params: trace, step
// returns: instance, kind, slowest_rank, op, op_key, arrival_ts_us, lateness_us, members
// For every collective of a step matched across ranks, the slowest rank: the member that reached
// it last (the others waited inside), and how late it was against the median arrival of the
// others (µs). Ties go to the lowest rank. Largest lateness first.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
MATCH (c:Collective {trace: $trace, step: $step}) WHERE c.reliable = true
MATCH (c)<-[:MEMBER_OF]-(o:Op)
WITH c, o ORDER BY o.start_us DESC, o.rank
WITH c, collect(o) AS members
WITH c, members, members[0] AS last
UNWIND members[1..] AS other
WITH c, last, size(members) AS n, percentileCont(other.start_us, 0.5) AS median_us
RETURN c.instance AS instance, c.kind AS kind, last.rank AS slowest_rank, last.name AS op,
       last.key AS op_key, last.ts_us AS arrival_ts_us, last.start_us - median_us AS lateness_us, n AS members
ORDER BY lateness_us DESC, instance
