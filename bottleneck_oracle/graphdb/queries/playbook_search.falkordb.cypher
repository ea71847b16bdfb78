// name: playbook_search
// mode: read
// guard: none
// params: vector, k
// returns: key, category, title, signal, remedy, effect, similarity
// The k playbook entries nearest to a question's embedding (cosine similarity, 1 = same
// direction). FalkorDB's vector index returns a cosine distance, turned into a similarity here.
CALL db.idx.vector.queryNodes('Playbook', 'embedding', $k, vecf32($vector)) YIELD node, score
RETURN node.key AS key, node.category AS category, node.title AS title, node.signal AS signal,
       node.remedy AS remedy, node.effect AS effect, 1.0 - score AS similarity
ORDER BY similarity DESC, key
