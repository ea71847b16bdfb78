// name: load_finding_embeddings
// mode: write
// params: trace, idx, embedding
// returns: updated
// Stores the embeddings of a trace's findings (columns of equal length: finding idx, vector) as
// lists of floats, which Neo4j's vector index reads. Setting them again replaces them.
UNWIND range(0, size($idx) - 1) AS i
MATCH (f:Finding {key: $trace + ':' + toString($idx[i])})
SET f.embedding = $embedding[i]
RETURN count(*) AS updated
