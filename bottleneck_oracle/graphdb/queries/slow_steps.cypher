// name: slow_steps
// mode: read
// guard: trace
// params: trace
// returns: step, rank, wall_ms, median_ms, excess_ms
// The slow steps of a trace, largest excess first: a (step, rank) whose wall time stands out
// from the median of the same rank's other steps (ratio and robust spread, see findings/slow_steps).
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
MATCH (s:Step {trace: $trace}) WHERE s.slow = true
RETURN s.step AS step, s.rank AS rank, s.wall_ms AS wall_ms, s.median_ms AS median_ms, s.excess_ms AS excess_ms
ORDER BY excess_ms DESC, step, rank
