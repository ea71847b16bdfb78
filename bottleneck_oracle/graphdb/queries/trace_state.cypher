// name: trace_state
// mode: read
// guard: none
// params: trace
// returns: status, detail, hops, plan, schema_version
// Where a trace's load stands, for the loader: nothing when it was never loaded; a status of
// 'loading' with the plan when a load is under way or crashed (its parts: load_parts).
MATCH (t:Trace {id: $trace})
RETURN t.status AS status, t.detail AS detail, t.hops AS hops, t.plan AS plan,
       t.schema_version AS schema_version
