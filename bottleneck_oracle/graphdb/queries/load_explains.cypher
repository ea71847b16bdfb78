// name: load_explains
// mode: write
// params: trace, part, cursor, finding, step_key
// returns: created
// Links one batch of findings to the steps they explain (a chronic finding: every step of its
// ranks) and records the batch as committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($finding) - 1) AS i
WITH t, p, $trace + ':' + toString($finding[i]) AS finding_key, $step_key[i] AS step_key
MATCH (f:Finding {key: finding_key})
MATCH (s:Step {key: step_key})
CREATE (f)-[:EXPLAINS]->(s)
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
