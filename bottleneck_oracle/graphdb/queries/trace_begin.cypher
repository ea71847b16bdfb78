// name: trace_begin
// mode: write
// params: trace, name, detail, hops, plan, schema_version, files, ranks, world_size, events, graph_nodes, graph_edges, steps_annotated, started_at
// returns: trace
// Starts (or restarts) the load of a trace: the Trace node exists with status 'loading', so
// no query sees the trace until trace_finish; its parts' cursors are LoadPart nodes (load_parts_begin).
MERGE (t:Trace {id: $trace})
SET t.status = 'loading', t.name = $name, t.detail = $detail, t.hops = $hops, t.plan = $plan,
    t.schema_version = $schema_version, t.files = $files, t.ranks = $ranks,
    t.world_size = $world_size, t.events = $events, t.graph_nodes = $graph_nodes,
    t.graph_edges = $graph_edges, t.steps_annotated = $steps_annotated, t.started_at = $started_at,
    t.loaded_at = null, t.steps = null, t.ops = null, t.relationships = null
RETURN t.id AS trace
