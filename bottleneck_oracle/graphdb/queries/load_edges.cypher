// name: load_edges
// mode: write
// template: REL
// params: trace, cursor, src, dst
// returns: created
// Creates one batch of DAG edges of one type (REL, a relationship type of the schema) between
// ops given by node index, and records the batch as committed in the same transaction.
// The batch runs only when the previous one is the last committed (cursor - 1), so a batch
// is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading' AND t.cursor = $cursor - 1
UNWIND range(0, size($src) - 1) AS i
WITH t, $trace + ':' + toString($src[i]) AS src_key, $trace + ':' + toString($dst[i]) AS dst_key
MATCH (a:Op {key: src_key})
MATCH (b:Op {key: dst_key})
CREATE (a)-[:{REL}]->(b)
WITH t, count(*) AS created
SET t.cursor = $cursor
RETURN created
