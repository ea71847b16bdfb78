"""The timeline of a step on the shipped example (2 ranks, rank 1 pauses 150 ms in step 5) and on a
hand-built two-stream GPU trace: lanes, order, window, critical flags, the event budget, the what-if's
new critical path."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import NotFoundError
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.whatif.predict import predict_whatif
from bottleneck_oracle.workspace import timeline
from bottleneck_oracle.workspace.timeline import step_timeline, trace_timeline, whatif_paths
from bottleneck_oracle.workspace.traces import open_trace
from tests.conftest import REPO, WILD
from tests.tracebuilder import kernel, runtime, step, sync, write

GPT = REPO / "examples" / "gpt_2rank"


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    return open_trace([GPT], Settings(home=tmp_path_factory.mktemp("timeline"), workers=2)).analysis


@pytest.fixture(scope="module")
def step5(gpt: Analysis) -> dict:
    return step_timeline(gpt, 5)


def _slowest(a: Analysis, step: int):  # type: ignore[no-untyped-def]
    return max((r for r in a.steps if r.step == step), key=lambda r: r.wall_ns)


def test_timeline_lanes_cover_both_ranks_and_every_event_has_its_lane(step5: dict) -> None:
    lanes = step5["lanes"]
    assert {lane["rank"] for lane in lanes} == {0, 1}
    assert all(lane["kind"] == "thread" and lane["label"].startswith("thread ") for lane in lanes)  # a gloo job
    assert [lane["rank"] for lane in lanes] == sorted(lane["rank"] for lane in lanes)
    ids = {lane["id"] for lane in lanes}
    assert {e["lane"] for e in step5["events"]} == ids
    assert {e["name"] for e in step5["events"]} >= {"ProfilerStep#5", "aten::select"}


def test_timeline_events_are_sorted_and_inside_the_step_window(gpt: Analysis, step5: dict) -> None:
    events = step5["events"]
    starts = [e["start_ms"] for e in events]
    assert starts == sorted(starts) and len(events) > 1000
    assert all(e["start_ms"] >= 0 and e["start_ms"] + e["dur_ms"] <= step5["span_ms"] + 1e-3 for e in events)
    rows = [i for i, s in enumerate(gpt.graph.steps.step.tolist()) if s == 5]
    assert step5["t0_ms"] == round(min(int(gpt.graph.steps.start_ns[i]) for i in rows) / 1e6, 4)
    assert step5["span_ms"] == pytest.approx(179.484, abs=1e-3)  # rank 1's step 5, the slowest
    assert len({e["id"] for e in events}) == len(events) and step5["dropped"] == 0


def test_timeline_critical_flags_match_the_slowest_ranks_critical_path(gpt: Analysis, step5: dict) -> None:
    report = _slowest(gpt, 5)
    assert step5["critical_rank"] == report.rank == 1
    assert step5["critical_path"] == report.path_nodes().tolist() and step5["critical_path"]
    assert {e["id"] for e in step5["events"] if e["critical"]} == set(step5["critical_path"])
    on_path = [e for e in step5["events"] if e["critical"]]
    assert all(e["slack_ms"] == 0 for e in on_path)
    # the pause is idle time: the ProfilerStep range around it is not on the path as work
    assert not next(e for e in step5["events"] if e["name"] == "ProfilerStep#5" and e["lane"] == 3)["critical"]
    loader = [e for e in step5["events"] if e["name"].startswith("enumerate(DataLoader)")]
    assert loader and all(e["category"] == "data_loading" for e in loader)


def test_timeline_of_one_rank_shows_its_lanes_and_its_path(gpt: Analysis) -> None:
    tl = step_timeline(gpt, 5, ranks=[0])
    assert {lane["rank"] for lane in tl["lanes"]} == {0} and tl["critical_rank"] == 0
    lanes = {lane["id"] for lane in tl["lanes"]}
    assert all(e["lane"] in lanes for e in tl["events"])
    rank0 = next(r for r in gpt.steps if r.step == 5 and r.rank == 0)
    on_rank0 = [n for n in rank0.path_nodes().tolist() if gpt.graph.rank[n] == 0]
    assert tl["critical_path"] == on_rank0


def test_max_events_drops_the_shortest_non_critical_events_first(step5: dict, gpt: Analysis) -> None:
    critical = [e for e in step5["events"] if e["critical"]]
    budget = len(critical) + 50
    small = step_timeline(gpt, 5, max_events=budget)
    assert len(small["events"]) == budget and small["dropped"] == len(step5["events"]) - budget
    assert {e["id"] for e in small["events"] if e["critical"]} == {e["id"] for e in critical}
    kept = {e["id"] for e in small["events"]}
    kept_off = [e["dur_ms"] for e in step5["events"] if not e["critical"] and e["id"] in kept]
    dropped = [e["dur_ms"] for e in step5["events"] if e["id"] not in kept]
    assert len(kept_off) == 50 and min(kept_off) >= max(dropped)
    starts = [e["start_ms"] for e in small["events"]]
    assert starts == sorted(starts) and small["lanes"] == step5["lanes"]
    tiny = step_timeline(gpt, 5, max_events=10)  # fewer than the path: its longest events stay
    assert len(tiny["events"]) == 10 and all(e["critical"] for e in tiny["events"])


def test_an_unknown_step_or_rank_names_those_there_are(gpt: Analysis) -> None:
    with pytest.raises(NotFoundError) as step_error:
        step_timeline(gpt, 42)
    with pytest.raises(NotFoundError) as rank_error:
        step_timeline(gpt, 5, ranks=[0, 7])
    with pytest.raises(ValueError):
        step_timeline(gpt, 5, max_events=0)
    assert "step 42" in str(step_error.value) and "2, 3, 4, 5, 6, 7" in str(step_error.value)
    assert "rank 7" in str(rank_error.value) and "0, 1" in str(rank_error.value)


def test_trace_timeline_resolves_the_trace_and_gives_its_id(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workers=2)
    tl = trace_timeline([GPT], 3, settings, max_events=100)
    again = trace_timeline(tl["trace_id"], 3, settings, max_events=100)  # now by id, from the workspace
    assert tl["trace_id"] and again == tl and tl["step"] == 3 and len(tl["events"]) == 100


def test_gpu_streams_are_stream_lanes_and_kernels_gpu_compute(tmp_path: Path) -> None:
    events = [  # a kernel on stream 20 waits, through an event, for a kernel on stream 7
        step(1, 0, 70_000), runtime("cudaLaunchKernel", 5_000, 3, corr=1), runtime("cudaEventRecord", 5_010, 1, corr=2),
        runtime("cudaStreamWaitEvent", 5_012, 1, corr=3),
        sync("Stream Wait Event", 5_012, 1, corr=3, stream=20, wait_on_stream=7, wait_on_cuda_event_record_corr_id=2),
        runtime("cudaLaunchKernel", 5_014, 3, corr=4), runtime("cudaDeviceSynchronize", 30_000, 28_006, corr=5),
        sync("Context Sync", 30_000, 28_006, corr=5),
        kernel("KA", 5_006, 44_994, corr=1, stream=7), kernel("KB", 50_004, 7_996, corr=4, stream=20),
    ]
    tl = step_timeline(analyze(read_trace(write(tmp_path / "t.json.gz", events))), 1)
    kinds = {lane["label"]: lane["kind"] for lane in tl["lanes"]}
    assert sorted(k for k in kinds.values()) == ["stream", "stream", "thread"]
    assert [lane["kind"] for lane in tl["lanes"]] == ["thread", "stream", "stream"]  # threads first
    by_name = {e["name"]: e for e in tl["events"]}
    assert by_name["KA"]["category"] == by_name["KB"]["category"] == "gpu_compute"
    assert by_name["KA"]["critical"] and by_name["KB"]["critical"]
    assert by_name["cudaLaunchKernel"]["category"] == "launch_overhead"
    assert tl["critical_path"].index(by_name["KA"]["id"]) < tl["critical_path"].index(by_name["KB"]["id"])


def test_whatif_paths_gives_the_new_critical_path_beside_the_old(gpt: Analysis, step5: dict) -> None:
    p = whatif_paths(predict_whatif(gpt, 5, [parse_edit("remove name=aten::select")]))
    assert p["old_critical_path"] == step5["critical_path"]
    left = set(p["old_critical_path"]) - set(p["critical_path"])
    # the removed ops (and the calls nested in them) left the path
    assert left and {gpt.graph.node_name(n) for n in left} == {"aten::select", "aten::as_strided"}
    assert all(gpt.graph.node_name(gpt.graph.parent[n]) == "aten::select" for n in left
               if gpt.graph.node_name(n) == "aten::as_strided")
    assert all(gpt.graph.step[n] == 5 for n in p["critical_path"])
    assert p["critical_path_summary"]["rank"] == 1 and p["new_critical_path"]["wall_ms"] < 179.484
    fixed = whatif_paths(predict_whatif(gpt, 5, [parse_edit("fix host_pause")]))
    assert fixed["new_critical_path"]["wall_ms"] < 40  # the pause was idle time: the same ops, less wait


def test_the_gpu_strip_closes_the_shortest_gaps_past_its_interval_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    a = analyze(read_trace([WILD / "tracelens" / "h100" / "qwen1.5_0.5b_chat" / "trace.json.gz"]))
    (full,) = step_timeline(a, 6)["gpu"]
    assert len(full["busy"]) > 100 and sum(e - s for s, e in full["busy"]) == pytest.approx(full["busy_ms"], abs=0.01)
    monkeypatch.setattr(timeline, "STRIP_INTERVALS", 10)
    (few,) = step_timeline(a, 6)["gpu"]
    gaps = sorted(s1 - e0 for (_, e0), (s1, _) in zip(full["busy"], full["busy"][1:]))
    assert len(few["busy"]) == 10
    assert few["busy"][0][0] == full["busy"][0][0] and few["busy"][-1][1] == full["busy"][-1][1]
    kept = sorted(s1 - e0 for (_, e0), (s1, _) in zip(few["busy"], few["busy"][1:]))
    assert kept == gaps[-9:]  # the nine longest idle gaps stay open
    assert step_timeline(analyze(read_trace(REPO / "examples" / "gpt_2rank")), 5)["gpu"] == []  # no GPU events
