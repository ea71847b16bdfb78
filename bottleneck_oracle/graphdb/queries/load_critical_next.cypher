// name: load_critical_next
// mode: write
// params: trace, part, cursor, path, pos, src, dst, gap, category, rank, contrib_us, ts_us
// returns: created
// Creates one batch of CRITICAL_NEXT relationships: segment pos of the critical path of the
// Step whose key is path, from the previous segment's op to this one's (node indexes). The chain
// starts at the Step; a gap (time no op covers) is a relationship into the Step itself (a null
// src or dst stands for the Step). Records the batch as committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($pos) - 1) AS i
WITH t, p, i, $path[i] AS path, $trace + ':' + toString($src[i]) AS src_key, $trace + ':' + toString($dst[i]) AS dst_key
MATCH (s:Step {key: path})
OPTIONAL MATCH (a:Op {key: src_key})
OPTIONAL MATCH (b:Op {key: dst_key})
WITH t, p, i, path, coalesce(a, s) AS x, coalesce(b, s) AS y
CREATE (x)-[:CRITICAL_NEXT {path: path, pos: $pos[i], gap: $gap[i], category: $category[i],
                             rank: $rank[i], contrib_us: $contrib_us[i], ts_us: $ts_us[i]}]->(y)
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
