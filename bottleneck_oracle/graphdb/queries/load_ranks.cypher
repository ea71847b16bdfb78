// name: load_ranks
// mode: write
// params: trace, part, cursor, rank, file, events, backend, devices
// returns: created
// Creates one batch of Rank nodes (columns of equal length), each IN_TRACE of its Trace, and
// records the batch as committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($rank) - 1) AS i
CREATE (r:Rank {key: $trace + ':' + toString($rank[i]), trace: $trace, rank: $rank[i], file: $file[i],
                events: $events[i], backend: $backend[i], devices: $devices[i]})-[:IN_TRACE]->(t)
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
