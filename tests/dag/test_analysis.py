from __future__ import annotations

from bottleneck_oracle.dag.analysis import analyze
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL


def test_partial_last_step_is_kept_out_of_findings_and_slow_steps() -> None:
    # amd_mi250: ProfilerStep#1 9.3 ms, then #2 cut to 49 µs by the end of the recording
    a = analyze(read_trace(REAL / "hta" / "amd_mi250"))
    assert [(r.step, r.rank) for r in a.steps] == [(1, 0), (2, 0)]
    assert a.slow_steps == ()
    assert all(f.step != 2 for f in a.findings)


def test_slack_is_zero_on_the_path_that_ends_the_step() -> None:
    # slack is measured against the end of the step on the last rank to finish it
    a = analyze(read_trace(REAL / "param" / "dlrm_8rank_kineto"))
    last = max(a.steps, key=lambda r: r.end_ns)
    on_path = last.path_node[last.path_node >= 0]
    assert (a.slack_ns[on_path] == 0).all()
    earlier = min(a.steps, key=lambda r: r.end_ns)
    own = earlier.path_node[(earlier.path_node >= 0) & (earlier.path_rank == earlier.rank)]
    assert (a.slack_ns[own] > 0).any()  # a rank that finished early had room
    assert (a.slack_ns > 0).mean() > 0.3
