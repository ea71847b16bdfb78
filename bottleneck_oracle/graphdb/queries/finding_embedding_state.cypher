// name: finding_embedding_state
// mode: read
// guard: trace
// params: trace
// returns: findings, embedded
// How many findings a complete trace has, and how many of them carry an embedding (finding memory).
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
OPTIONAL MATCH (f:Finding {trace: $trace})
RETURN count(f) AS findings, count(f.embedding) AS embedded
