// name: bulk_create_edges
// mode: write
// params: src, dst
// returns: created
// The relationship ceiling of a load (benchmarks/bench_graphdb.py): UNWIND ... CREATE of the same
// edges between BulkOp nodes found by their indexed string key (on FalkorDB 4.16 an integer
// index lookup is about 5x slower than a string one), with no progress mark.
UNWIND range(0, size($src) - 1) AS i
WITH toString($src[i]) AS src_key, toString($dst[i]) AS dst_key
MATCH (a:BulkOp {key: src_key})
MATCH (b:BulkOp {key: dst_key})
CREATE (a)-[:BULK]->(b)
RETURN count(*) AS created
