// name: trace_steps
// mode: read
// guard: trace
// params: trace
// returns: step, rank, wall_ms, critical_path_ms, slow, partial, median_ms, excess_ms, gpu_compute_ms, communication_ms, cpu_ms, launch_overhead_ms, sync_wait_ms, data_loading_ms, idle_ms, untraced_wait_ms, gpu_busy_ms, gpu_idle_ms, gpu_computation_ms, gpu_comm_ms, gpu_exposed_comm_ms, gpu_memcpy_ms, gpu_exposed_memcpy_ms, gpu_busy_pct, gpu_bound, gpu_evidence, gpu_op_classes, gpu_op_classes_ms
// The steps of a trace, one row per (step, rank), with the wall time and where it went: the
// seven attribution categories sum to wall_ms (idle_ms is the path's idle time, untraced_wait_ms the part of it
// where GPU work waited for something the trace does not show; gpu_idle_ms the GPU's idle time,
// null with gpu_* on a rank without GPU work). Step -1 is a trace without ProfilerStep marks.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'complete'
MATCH (s:Step {trace: $trace})
RETURN s.step AS step, s.rank AS rank, s.wall_ms AS wall_ms, s.critical_path_ms AS critical_path_ms,
       s.slow AS slow, s.partial AS partial, s.median_ms AS median_ms, s.excess_ms AS excess_ms,
       s.gpu_compute_ms AS gpu_compute_ms,
       s.communication_ms AS communication_ms, s.cpu_ms AS cpu_ms, s.launch_overhead_ms AS launch_overhead_ms,
       s.sync_wait_ms AS sync_wait_ms, s.data_loading_ms AS data_loading_ms, s.idle_ms AS idle_ms,
       s.untraced_wait_ms AS untraced_wait_ms,
       s.gpu_busy_ms AS gpu_busy_ms, s.gpu_idle_ms AS gpu_idle_ms, s.gpu_computation_ms AS gpu_computation_ms,
       s.gpu_comm_ms AS gpu_comm_ms, s.gpu_exposed_comm_ms AS gpu_exposed_comm_ms, s.gpu_memcpy_ms AS gpu_memcpy_ms,
       s.gpu_exposed_memcpy_ms AS gpu_exposed_memcpy_ms, s.gpu_busy_pct AS gpu_busy_pct, s.gpu_bound AS gpu_bound,
       s.gpu_evidence AS gpu_evidence, s.gpu_op_classes AS gpu_op_classes, s.gpu_op_classes_ms AS gpu_op_classes_ms
ORDER BY step, rank
