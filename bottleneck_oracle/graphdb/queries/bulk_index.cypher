// name: bulk_index
// mode: write
// params:
// returns:
// The index the bulk ceiling finds relationship ends by (benchmarks/bench_graphdb.py).
CREATE INDEX FOR (n:BulkOp) ON (n.key)
