// name: load_edges
// mode: write
// template: REL
// params: trace, part, cursor, src, dst
// returns: created
// Creates one batch of DAG edges of one type (REL, a relationship type of the schema) between
// ops given by node index, and records the batch as committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($src) - 1) AS i
WITH t, p, $trace + ':' + toString($src[i]) AS src_key, $trace + ':' + toString($dst[i]) AS dst_key
MATCH (a:Op {key: src_key})
MATCH (b:Op {key: dst_key})
CREATE (a)-[:{REL}]->(b)
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
