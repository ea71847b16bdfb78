// name: load_steps
// mode: write
// params: trace, part, cursor, step, rank, start_us, ts_us, wall_ms, critical_path_ms, slow, partial, median_ms, excess_ms, gpu_compute_ms, communication_ms, cpu_ms, launch_overhead_ms, sync_wait_ms, data_loading_ms, idle_ms, untraced_wait_ms, path_segments, top_ops, top_ops_us, gpu_busy_ms, gpu_idle_ms, gpu_computation_ms, gpu_comm_ms, gpu_exposed_comm_ms, gpu_memcpy_ms, gpu_exposed_memcpy_ms, gpu_busy_pct, gpu_bound, gpu_evidence, gpu_op_classes, gpu_op_classes_ms
// returns: created
// Creates one batch of Step nodes, one per (step, rank), each ON_RANK of its Rank, and records
// the batch as committed in the same transaction. The gpu_* properties are the GPU timeline over
// the step's window (null on a rank without GPU work) and its GPU-bound verdict; untraced_wait_ms is
// the part of idle_ms where GPU work waited for something the trace does not show.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($step) - 1) AS i
WITH t, p, i, $trace + ':' + toString($rank[i]) AS rank_key
MATCH (r:Rank {key: rank_key})
CREATE (s:Step {key: $trace + ':' + toString($step[i]) + ':' + toString($rank[i]), trace: $trace,
                step: $step[i], rank: $rank[i], start_us: $start_us[i], ts_us: $ts_us[i], wall_ms: $wall_ms[i],
                critical_path_ms: $critical_path_ms[i], slow: $slow[i], partial: $partial[i],
                median_ms: $median_ms[i], excess_ms: $excess_ms[i], gpu_compute_ms: $gpu_compute_ms[i],
                communication_ms: $communication_ms[i], cpu_ms: $cpu_ms[i],
                launch_overhead_ms: $launch_overhead_ms[i], sync_wait_ms: $sync_wait_ms[i],
                data_loading_ms: $data_loading_ms[i], idle_ms: $idle_ms[i], untraced_wait_ms: $untraced_wait_ms[i],
                path_segments: $path_segments[i],
                top_ops: $top_ops[i], top_ops_us: $top_ops_us[i],
                gpu_busy_ms: $gpu_busy_ms[i], gpu_idle_ms: $gpu_idle_ms[i], gpu_computation_ms: $gpu_computation_ms[i],
                gpu_comm_ms: $gpu_comm_ms[i], gpu_exposed_comm_ms: $gpu_exposed_comm_ms[i], gpu_memcpy_ms: $gpu_memcpy_ms[i],
                gpu_exposed_memcpy_ms: $gpu_exposed_memcpy_ms[i], gpu_busy_pct: $gpu_busy_pct[i], gpu_bound: $gpu_bound[i],
                gpu_evidence: $gpu_evidence[i], gpu_op_classes: $gpu_op_classes[i], gpu_op_classes_ms: $gpu_op_classes_ms[i]})-[:ON_RANK]->(r)
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
