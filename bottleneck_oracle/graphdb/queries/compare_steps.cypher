// name: compare_steps
// mode: read
// guard: trace
// params: trace, rank, step_a, step_b, k
// returns: kind, name, count_a, count_b, dur_a_us, dur_b_us, delta_us, contrib_a_us, contrib_b_us
// Two steps of one rank compared op class by op class (an op class is a kind and a name, such as
// kernel 'ampere_sgemm_128x64_tn'): how many ran, their total time and their contribution to the
// critical path in each step; the k classes whose time changed most first (delta = b - a).
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
UNWIND [$step_a, $step_b] AS step
WITH $trace + ':' + toString(step) + ':' + toString($rank) AS step_key
MATCH (s:Step {key: step_key})<-[:IN_STEP]-(o:Op)
WITH o.kind AS kind, o.name AS name, s.step AS step, count(o) AS n, sum(o.dur_us) AS dur,
     sum(o.contrib_us) AS contrib
WITH kind, name,
     sum(CASE WHEN step = $step_a THEN n ELSE 0 END) AS count_a,
     sum(CASE WHEN step = $step_b THEN n ELSE 0 END) AS count_b,
     sum(CASE WHEN step = $step_a THEN dur ELSE 0.0 END) AS dur_a_us,
     sum(CASE WHEN step = $step_b THEN dur ELSE 0.0 END) AS dur_b_us,
     sum(CASE WHEN step = $step_a THEN contrib ELSE 0.0 END) AS contrib_a_us,
     sum(CASE WHEN step = $step_b THEN contrib ELSE 0.0 END) AS contrib_b_us
RETURN kind, name, count_a, count_b, dur_a_us, dur_b_us, dur_b_us - dur_a_us AS delta_us,
       contrib_a_us, contrib_b_us
ORDER BY abs(delta_us) DESC, kind, name
LIMIT $k
