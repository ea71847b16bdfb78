// name: load_loose_ops
// mode: write
// params: trace, part, cursor, idx, name, kind, role, rank, step, lane, ts_us, start_us, dur_us, slack_us, on_path, contrib_us, collective
// returns: created
// Creates one batch of Op nodes that lie outside every step (before the first ProfilerStep,
// after the last) and records the batch as committed in the same transaction.
// The batch runs only when the previous batch of its part is the last committed (the LoadPart's
// cursor is cursor - 1), so a batch is applied once however often it is sent.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
MATCH (p:LoadPart {key: $part}) WHERE p.cursor = $cursor - 1
UNWIND range(0, size($idx) - 1) AS i
CREATE (o:Op {key: $trace + ':' + toString($idx[i]), trace: $trace, idx: $idx[i], name: $name[i], kind: $kind[i],
              role: $role[i], rank: $rank[i], step: $step[i], lane: $lane[i], ts_us: $ts_us[i],
              start_us: $start_us[i], dur_us: $dur_us[i], slack_us: $slack_us[i], on_path: $on_path[i],
              contrib_us: $contrib_us[i], collective: $collective[i]})
WITH p, count(*) AS created
SET p.cursor = $cursor
RETURN created
