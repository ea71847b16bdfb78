// name: trace_inventory
// mode: read
// guard: none
// params: trace
// returns: what, n, distinct_keys
// How many nodes of each label and relationships of each type a trace has, loaded or not,
// with the number of distinct keys per label (equal to n unless something was loaded twice).
MATCH (n:Op {trace: $trace}) RETURN 'Op' AS what, count(n) AS n, count(DISTINCT n.key) AS distinct_keys
UNION ALL
MATCH (n:Step {trace: $trace}) RETURN 'Step' AS what, count(n) AS n, count(DISTINCT n.key) AS distinct_keys
UNION ALL
MATCH (n:Rank {trace: $trace}) RETURN 'Rank' AS what, count(n) AS n, count(DISTINCT n.key) AS distinct_keys
UNION ALL
MATCH (n:Collective {trace: $trace}) RETURN 'Collective' AS what, count(n) AS n, count(DISTINCT n.key) AS distinct_keys
UNION ALL
MATCH (n:Finding {trace: $trace}) RETURN 'Finding' AS what, count(n) AS n, count(DISTINCT n.key) AS distinct_keys
UNION ALL
MATCH (:Op {trace: $trace})-[r]->() RETURN type(r) AS what, count(r) AS n, 0 AS distinct_keys
UNION ALL
MATCH (:Step {trace: $trace})-[r]->() RETURN type(r) AS what, count(r) AS n, 0 AS distinct_keys
UNION ALL
MATCH (:Rank {trace: $trace})-[r]->() RETURN type(r) AS what, count(r) AS n, 0 AS distinct_keys
UNION ALL
MATCH (:Finding {trace: $trace})-[r]->() RETURN type(r) AS what, count(r) AS n, 0 AS distinct_keys
