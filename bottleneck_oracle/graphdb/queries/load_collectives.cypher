// name: load_collectives
// mode: write
// params: trace, part, cursor, instance, kind, step, matched_by, reliable
// returns: created
// Creates one batch of Collective nodes (instances matched across ranks) and records the batch
// as committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($instance) - 1) AS i
CREATE (c:Collective {key: $trace + ':' + toString($instance[i]), trace: $trace, instance: $instance[i],
                      kind: $kind[i], step: $step[i], matched_by: $matched_by[i], reliable: $reliable[i]})
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
