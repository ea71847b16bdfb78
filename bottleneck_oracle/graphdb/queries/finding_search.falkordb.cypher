// name: finding_search
// mode: read
// guard: none
// params: vector, candidates, k, exclude
// returns: trace_id, trace_name, idx, step, category, severity, ranks, ops, impact_ms, evidence, similarity, remedies
// Finding memory: the k findings of every complete trace nearest to a question's embedding
// (cosine similarity, 1 = same direction), leaving out the trace $exclude (null: none), with the
// titles of the playbook's remedies for the finding's category. The index is asked for
// $candidates neighbours (more than k) so that findings of hidden or excluded traces leave k.
// FalkorDB's vector index returns a cosine distance, turned into a similarity here.
CALL db.idx.vector.queryNodes('Finding', 'embedding', $candidates, vecf32($vector)) YIELD node, score
WITH node AS f, 1.0 - score AS similarity
MATCH (t:Trace {id: f.trace})
WHERE t.status = 'complete' AND ($exclude IS NULL OR t.id <> $exclude)
WITH f, t, similarity
ORDER BY similarity DESC, f.key
LIMIT $k
OPTIONAL MATCH (p:Playbook {category: f.category})
WITH f, t, similarity, p
ORDER BY p.key
WITH f, t, similarity, collect(p.title) AS remedies
RETURN t.id AS trace_id, t.name AS trace_name, f.idx AS idx, f.step AS step, f.category AS category,
       f.severity AS severity, f.ranks AS ranks, f.ops AS ops, f.impact_ms AS impact_ms, f.evidence AS evidence,
       similarity, remedies
ORDER BY similarity DESC, trace_id, idx
