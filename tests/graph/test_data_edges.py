"""A cross-thread data dependency from an execution trace explains a wait nothing else explains."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.graph.types import Category, EdgeType
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import op, step, write

THREAD = "[pytorch|profiler|execution_trace|thread]"


def _et_node(node_id: int, rf_id: int, name: str, parent: int, tid: int, ins: list, outs: list) -> dict:
    return {"id": node_id, "rf_id": rf_id, "name": name, "parent": parent, "tid": tid,
            "inputs": ins, "input_types": ["Tensor(float)"] * len(ins),
            "outputs": outs, "output_types": ["Tensor(float)"] * len(outs)}


def _job(folder: Path, with_et: bool) -> Path:
    # main thread: P [0,10ms] writes X, then Q keeps it busy until 30 ms (no gap: P hands off nothing);
    # thread 2 idles until 10.05 ms, then C reads X until 40 ms and ends the step.
    events = [
        step(1, 0, 40_000),
        op("P", 0, 10_000, **{"External id": 1}), op("Q", 10_000, 20_000, **{"External id": 2}),
        op("C", 10_050, 29_950, tid=2, **{"External id": 3}),
    ]
    write(folder / "rank0.json.gz", events, rank=0, world=1)
    if with_et:
        x = [7, 70, 0, 16, 4, "cpu"]
        nodes = [
            _et_node(1, 0, "[pytorch|profiler|execution_trace|process]", 1, 0, [], []),
            _et_node(2, 0, THREAD, 1, 1, [], []), _et_node(3, 0, THREAD, 1, 2, [], []),
            _et_node(4, 1, "P", 2, 1, [], [x]), _et_node(5, 2, "Q", 2, 1, [], []),
            _et_node(6, 3, "C", 3, 2, [x], []),
        ]
        doc = {"schema": "1.0.1", "pid": 100, "nodes": nodes}
        (folder / "rank0_et.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return folder


def test_data_edge_explains_the_wait_of_the_consuming_thread(tmp_path: Path) -> None:
    plain = analyze(read_trace(_job(tmp_path / "plain", with_et=False)))
    linked = analyze(read_trace(_job(tmp_path / "linked", with_et=True)))
    assert (linked.graph.edge_type == EdgeType.DATA).sum() == 1
    (p,), (q,) = plain.steps, linked.steps
    # without the ET, nothing says why C started at 10.05 ms: idle; with it, C waited for P
    assert p.breakdown_ns[Category.IDLE] == 10_050_000
    assert q.breakdown_ns[Category.IDLE] == 0
    assert q.breakdown_ns[Category.CPU] == 40_000_000
    names = [linked.graph.node_name(n) for n in q.path_node if n >= 0]
    assert names[:2] == ["P", "C"] and "Q" not in names
