from __future__ import annotations

from bottleneck_oracle.dag.analysis import analyze
from bottleneck_oracle.dag.report import analysis_to_dict, file_ts_us
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL


def test_file_ts_us_inverts_the_base_time() -> None:
    a = analyze(read_trace(REAL / "hta" / "nccl_parser_config"))
    info = a.graph.trace.ranks[0]
    node = 0
    expected = (int(a.graph.start_ns[node]) + a.graph.trace.origin_ns - info.base_ns) / 1000
    assert file_ts_us(a, 0, int(a.graph.start_ns[node])) == round(expected, 3)


def test_filters_keep_matching_steps_and_findings() -> None:
    a = analyze(read_trace(REAL / "param" / "dlrm_8rank_kineto"))
    full, one = analysis_to_dict(a), analysis_to_dict(a, step=10, rank=7)
    assert len(full["steps"]) == 8 and [(s["step"], s["rank"]) for s in one["steps"]] == [(10, 7)]
    assert all(7 in f["ranks"] for f in one["findings"])
    assert analysis_to_dict(a, step=99)["steps"] == []
    assert full["trace"]["world_size"] == 8 and full["trace"]["collectives_matched"] == 8
