// name: load_explains
// mode: write
// params: trace, cursor, finding, step_key
// returns: created
// Links one batch of findings to the steps they explain (a chronic finding: every step of its
// ranks) and records the batch as committed in the same transaction.
// The batch runs only when the previous one is the last committed (cursor - 1), so a batch
// is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading' AND t.cursor = $cursor - 1
UNWIND range(0, size($finding) - 1) AS i
WITH t, $trace + ':' + toString($finding[i]) AS finding_key, $step_key[i] AS step_key
MATCH (f:Finding {key: finding_key})
MATCH (s:Step {key: step_key})
CREATE (f)-[:EXPLAINS]->(s)
WITH t, count(*) AS created
SET t.cursor = $cursor
RETURN created
