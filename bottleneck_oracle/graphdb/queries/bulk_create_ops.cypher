// name: bulk_create_ops
// mode: write
// params: idx, name, kind, role, rank, step, lane, ts_us, start_us, dur_us, slack_us, on_path, contrib_us, collective
// returns: created
// The ceiling a load is measured against (benchmarks/bench_graphdb.py): the database's own bulk
// UNWIND ... CREATE of the same op columns and a string key, with no constraint, no step to
// match and no progress mark.
UNWIND range(0, size($idx) - 1) AS i
CREATE (:BulkOp {key: toString($idx[i]), idx: $idx[i], name: $name[i], kind: $kind[i], role: $role[i],
                 rank: $rank[i], step: $step[i], lane: $lane[i], ts_us: $ts_us[i], start_us: $start_us[i],
                 dur_us: $dur_us[i], slack_us: $slack_us[i], on_path: $on_path[i], contrib_us: $contrib_us[i],
                 collective: $collective[i]})
RETURN count(*) AS created
