// name: load_member_of
// mode: write
// params: trace, part, cursor, op, instance
// returns: created
// Links one batch of ops to the Collective instance they take part in and records the batch as
// committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($op) - 1) AS i
WITH t, p, $trace + ':' + toString($op[i]) AS op_key, $trace + ':' + toString($instance[i]) AS collective_key
MATCH (o:Op {key: op_key})
MATCH (c:Collective {key: collective_key})
CREATE (o)-[:MEMBER_OF]->(c)
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
