// name: trace_steps
// mode: read
// guard: trace
// params: trace
// returns: step, rank, wall_ms, critical_path_ms, slow, partial, median_ms, excess_ms, gpu_compute_ms, communication_ms, cpu_ms, launch_overhead_ms, sync_wait_ms, data_loading_ms, idle_ms
// The steps of a trace, one row per (step, rank), with the wall time and where it went: the
// seven attribution categories sum to wall_ms. Step -1 is a trace without ProfilerStep marks.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
MATCH (s:Step {trace: $trace})
RETURN s.step AS step, s.rank AS rank, s.wall_ms AS wall_ms, s.critical_path_ms AS critical_path_ms,
       s.slow AS slow, s.partial AS partial, s.median_ms AS median_ms, s.excess_ms AS excess_ms,
       s.gpu_compute_ms AS gpu_compute_ms,
       s.communication_ms AS communication_ms, s.cpu_ms AS cpu_ms, s.launch_overhead_ms AS launch_overhead_ms,
       s.sync_wait_ms AS sync_wait_ms, s.data_loading_ms AS data_loading_ms, s.idle_ms AS idle_ms
ORDER BY step, rank
