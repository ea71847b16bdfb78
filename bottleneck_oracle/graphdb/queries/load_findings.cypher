// name: load_findings
// mode: write
// params: trace, part, cursor, idx, category, step, ranks, ops, impact_ms, evidence, severity, cause, waiting, waited_ms
// returns: created
// Creates one batch of Finding nodes (idx = rank in the analysis: major ones first, then minor
// anomalies of steps that are not slow; largest impact first within each) and
// records the batch as committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($idx) - 1) AS i
CREATE (f:Finding {key: $trace + ':' + toString($idx[i]), trace: $trace, idx: $idx[i],
                   category: $category[i], step: $step[i], ranks: $ranks[i], ops: $ops[i],
                   impact_ms: $impact_ms[i], evidence: $evidence[i], severity: $severity[i], cause: $cause[i],
                   waiting: $waiting[i], waited_ms: $waited_ms[i]})
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
