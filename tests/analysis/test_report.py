from __future__ import annotations

import numpy as np

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.report import PathColumns, analysis_to_dict, file_ts_us
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


def path_rows(columns: PathColumns) -> list[dict[str, object]]:
    """A column-wise path as one dict a segment, in order."""
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def test_path_columns_hold_the_step_report_segment_by_segment() -> None:
    a = analyze(read_trace(REAL / "param" / "dlrm_8rank_kineto"))
    report = next(r for r in a.steps if r.rank == 7)
    (step,) = analysis_to_dict(a, rank=7, full_paths=True)["steps"]
    rows = path_rows(step["critical_path"])
    assert len(rows) == len(report.path_node) == step["critical_path_len"]
    g = a.graph
    for row, node, dur in zip(rows, report.path_node.tolist(), report.path_dur_ns.tolist()):
        assert row["contrib_us"] == dur / 1000
        if node >= 0:
            assert (row["name"], row["dur_us"]) == (g.node_name(node), int(g.dur_ns[node]) / 1000)
            assert row["ts_us"] == file_ts_us(a, int(row["rank"]), int(g.start_ns[node]))
        else:
            assert (row["name"], row["kind"]) == ("(no op)", "gap")
    largest = np.sort(report.path_dur_ns)[::-1][:3] / 1000
    assert [e["contrib_us"] for e in step["top_contributors"][:3]] == largest.tolist()
