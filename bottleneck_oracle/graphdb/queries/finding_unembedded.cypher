// name: finding_unembedded
// mode: read
// guard: none
// params:
// returns: trace, idx, category, evidence, ops
// The findings of every complete trace that carry no embedding yet (a trace `oracle ask` loaded:
// its findings are embedded when the finding memory is first searched), with the text they are
// embedded from (category, evidence, ops), by trace and idx.
MATCH (t:Trace) WHERE t.status = 'complete'
WITH t.id AS trace
MATCH (f:Finding {trace: trace}) WHERE f.embedding IS NULL
RETURN trace, f.idx AS idx, f.category AS category, f.evidence AS evidence, f.ops AS ops
ORDER BY trace, idx
