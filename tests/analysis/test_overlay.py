from __future__ import annotations

import json
from pathlib import Path

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.overlay import write_overlay
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL


def test_overlay_is_a_chrome_trace_with_the_path_marked(tmp_path: Path) -> None:
    a = analyze(read_trace(REAL / "hta" / "cp_cuda_event_sync"))
    marked = write_overlay(a, tmp_path / "o.json")
    doc = json.loads((tmp_path / "o.json").read_text())
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(a.graph)
    critical = [e for e in xs if e["args"].get("critical")]
    assert len(critical) == marked > 0
    (r,) = a.steps
    assert {e["name"] for e in critical} == {a.graph.node_name(n) for n in r.path_node if n >= 0}
    flows = [e for e in doc["traceEvents"] if e["ph"] in "sf"]
    assert len({e["id"] for e in flows}) * 2 == len(flows)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rank 0 CPU", "rank 0 GPU"}
