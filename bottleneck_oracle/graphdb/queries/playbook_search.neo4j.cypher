// name: playbook_search
// mode: read
// guard: none
// params: vector, k
// returns: key, category, title, signal, remedy, effect, similarity
// The k playbook entries nearest to a question's embedding (cosine similarity, 1 = same
// direction). Neo4j's vector index scores cosine as (1 + cos) / 2, turned into cos here.
CALL db.index.vector.queryNodes('playbook_embedding', $k, $vector) YIELD node, score
RETURN node.key AS key, node.category AS category, node.title AS title, node.signal AS signal,
       node.remedy AS remedy, node.effect AS effect, 2.0 * score - 1.0 AS similarity
ORDER BY similarity DESC, key
