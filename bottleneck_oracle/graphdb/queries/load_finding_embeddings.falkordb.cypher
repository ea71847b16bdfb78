// name: load_finding_embeddings
// mode: write
// params: trace, idx, embedding
// returns: updated
// Stores the embeddings of a trace's findings (columns of equal length: finding idx, vector) as
// FalkorDB float32 vectors, which its vector index reads. Setting them again replaces them.
UNWIND range(0, size($idx) - 1) AS i
MATCH (f:Finding {key: $trace + ':' + toString($idx[i])})
SET f.embedding = vecf32($embedding[i])
RETURN count(*) AS updated
