"""The JSON of ``oracle stragglers`` and its Perfetto timelines: the fields the issue names, string keys,
seconds, and timelines whose events sit where the replays put them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bottleneck_oracle.graph.pipeline import build_job_graph
from bottleneck_oracle.job.straggler_edits import pipeline_whatif
from bottleneck_oracle.job.straggler_report import straggler_json, timeline_events
from bottleneck_oracle.job.straggler_verdict import straggler_verdict
from bottleneck_oracle.job.stragglers import analyze_stragglers
from bottleneck_oracle.traces.op_table import read_op_table
from bottleneck_oracle.truth.edits import parse_edit
from tests.conftest import STRAGGLERS


@pytest.fixture(scope="module")
def st():  # type: ignore[no-untyped-def]
    return analyze_stragglers(build_job_graph(read_op_table(STRAGGLERS / "ST")))


def test_the_json_holds_every_named_field_in_seconds_with_string_keys(st) -> None:  # type: ignore[no-untyped-def]
    edits = [pipeline_whatif(st, [parse_edit("even_microbatches")]),
             pipeline_whatif(st, [parse_edit("move_layer 3->0 layers=8")])]
    out = json.loads(json.dumps(straggler_json(st, straggler_verdict(st), edits)))
    assert {"slowdown", "step_slowdown", "by_dp_rank", "by_stage", "by_op_type", "by_worker", "worker_share",
            "stage_share", "cause", "headline", "fixes", "step_time_s", "heatmap", "whatif"} <= set(out)
    assert out["slowdown"] == pytest.approx(1.1787, abs=1e-4) and out["cause"] == "stage_imbalance"
    assert list(out["by_stage"])[0] == "3" and all(isinstance(k, str) for k in out["step_slowdown"])
    assert out["step_time_s"]["ideal"] == pytest.approx(1.8433, abs=1e-4)
    assert out["by_worker"]["7"] == {"dp_rank": 1, "stage": 3, "slowdown": pytest.approx(1.1779, abs=1e-4)}
    assert np.array(out["heatmap"]["values"]).shape == (2, 4)
    fix = out["fixes"][0]
    assert fix["interval_s"][0] <= fix["predicted_step_s"] <= fix["interval_s"][1] and fix["stage"] == 3
    assert "source" in fix and fix["saving_s"] == pytest.approx(
        out["step_time_s"]["no_launch_gaps"] - fix["predicted_step_s"], abs=2e-6)
    savings = [w["saving_s"] for w in out["whatif"]]
    assert savings == sorted(savings, reverse=True) and out["whatif"][0]["edits"] == ["move_layer 3->0 layers=8"]


def test_the_timelines_lay_steps_end_to_end_recorded_and_ideal(st) -> None:  # type: ignore[no-untyped-def]
    events = timeline_events(st, steps=2)
    ops = [e for e in events if e["ph"] == "X"]
    g = st.graph
    per = g.instances // len(g.steps)
    assert len(ops) == 2 * 2 * per
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert "recorded rank 7 (dp_rank 1, stage 3)" in names and "ideal rank 7 (dp_rank 1, stage 3)" in names
    for label, walls in (("recorded", st.recorded.step_ns), ("ideal", st.ideal.step_ns)):
        mine = [e for e in ops if e["cat"] == label]
        second = [e for e in mine if e["args"]["step"] == int(g.steps[1])]
        assert min(e["ts"] for e in second) >= walls[0] / 1e3 - 1e-6  # step 2 begins once step 1 is over
        end = max(e["ts"] + e["dur"] for e in mine)
        assert end == pytest.approx((walls[0] + walls[1]) / 1e3, rel=1e-9)
