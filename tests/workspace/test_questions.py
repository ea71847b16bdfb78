"""The questions asked after "why is step N slow?", answered from the real example trace in a real
FalkorDB: what bounds the job, the top ops, what a rank costs, what a change saves over the run."""

from __future__ import annotations

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.graphdb import GraphStore, open_store
from bottleneck_oracle.workspace import questions, steps
from bottleneck_oracle.workspace.loaded import LoadedTrace, loaded_trace


def test_the_cpu_job_is_host_bound_over_its_steady_steps(store: GraphStore, gpt: LoadedTrace,
                                                        agent_settings: Settings) -> None:
    b = questions.job_bound(store, gpt, agent_settings)
    rows = [r for r in steps.step_rows(store, gpt) if not r["partial"] and not r["slow"]]
    assert b["bound"] == "host" and b["gpu"] is None and not b["has_gpu"]  # a CPU capture: no GPU events
    assert 5 not in b["steps"] and b["steps"] == sorted({r["step"] for r in rows})  # step 5 is slow
    assert b["wall_ms"] == pytest.approx(sum(r["wall_ms"] for r in rows), abs=0.01)
    assert sum(b["shares_pct"].values()) == pytest.approx(100, abs=0.5)


def test_a_gpu_job_reads_its_busy_time(store: GraphStore, gpu_settings: Settings) -> None:
    with open_store(gpu_settings, start=True) as s:
        t = loaded_trace(s, None, gpu_settings)
        b = questions.job_bound(s, t, gpu_settings)
    assert b["has_gpu"] and 0 <= b["gpu"]["busy_pct"] <= 100 and b["gpu"]["idle_ms"] >= 0


def test_top_ops_lists_gpu_kernels_by_full_and_readable_name(gpu_settings: Settings) -> None:
    with open_store(gpu_settings, start=True) as s:
        t = loaded_trace(s, None, gpu_settings)
        run = questions.top_ops(s, t, settings=gpu_settings)
    kernels = run["kernels"]
    assert kernels and kernels[0]["dur_ms"] >= kernels[-1]["dur_ms"]
    assert all(k["short_name"] and "<" not in k["short_name"] and k["name"] for k in kernels)


def test_top_ops_of_a_step_and_of_the_run(store: GraphStore, gpt: LoadedTrace) -> None:
    one = questions.top_ops(store, gpt, 5)
    run = questions.top_ops(store, gpt)
    assert one["step"] == 5 and one["ops"] == steps.explain_step(store, gpt, 5, one["rank"])["top_ops"]
    assert run["step"] is None and run["ops"][0]["critical_ms"] >= run["ops"][-1]["critical_ms"]
    mm = next(o for o in run["ops"] if o["op"] == "aten::mm")
    assert mm["critical_ms"] > next(o for o in one["ops"] if o["op"] == "aten::mm")["critical_ms"]


def test_the_paused_rank_behaving_like_its_peer(store: GraphStore, gpt: LoadedTrace, agent_settings: Settings) -> None:
    p = questions.rank_like_peers(store, gpt, agent_settings, 5, 1)
    assert "fix host_pause rank=1 step=5" in p["edits"]
    assert p["baseline_ms"] - p["best_ms"] == pytest.approx(p["gain_ms"], abs=0.01)
    assert p["gain_ms"] > 100  # rank 1 pauses about 150 ms in step 5
    with pytest.raises(NotFoundError, match="no finding on it in step 3"):
        questions.rank_like_peers(store, gpt, agent_settings, 3, 0)


def test_a_fix_over_the_whole_run_saves_only_where_its_finding_is(gpt: LoadedTrace, agent_settings: Settings) -> None:
    w = questions.whatif_run(gpt, "fix host_pause", agent_settings)
    assert w["edit"] == "fix host_pause" and w["steps"] == 6
    assert w["gain_ms"] == pytest.approx(w["baseline_ms"] - w["best_ms"], abs=0.01)
    assert w["per_step"][0]["step"] == 5 and 3 in w["untouched_steps"]
    with pytest.raises(ConfigError):
        questions.whatif_run(gpt, "make it fast", agent_settings)


def test_a_gpu_waiting_for_what_the_trace_does_not_show_bounds_nothing_it_can_name(untraced_settings: Settings) -> None:
    with open_store(untraced_settings, start=True) as s:
        t = loaded_trace(s, None, untraced_settings)
        b = questions.job_bound(s, t, untraced_settings)
        rows = s.read("trace_steps", {"trace": t.trace_id})
        e = steps.explain_step(s, t, 1010)
        listed = steps.list_steps(s, t)
    waited = sum(r["untraced_wait_ms"] for r in rows)
    assert b["bound"] == "untraced" and b["breakdown_ms"]["untraced_wait"] == pytest.approx(waited, abs=0.002)
    # the wait left the host's idle time: what remains idle is the path's idle minus the wait
    assert b["breakdown_ms"].get("idle", 0.0) == pytest.approx(sum(r["idle_ms"] for r in rows) - waited, abs=0.002)
    assert b["shares_pct"]["untraced"] > 99 and sum(b["shares_pct"].values()) == pytest.approx(100, abs=0.5)
    assert e["untraced_wait"]["ms"] == next(r["untraced_wait_ms"] for r in rows if r["step"] == 1010)
    assert e["untraced_wait"]["pct"] == pytest.approx(100 * e["untraced_wait"]["ms"] / e["wall_ms"], abs=0.05)
    assert {(u["step"], u["rank"]) for u in listed["untraced_steps"]} <= {(r["step"], r["rank"]) for r in rows}
    assert (1010, 1) in {(u["step"], u["rank"]) for u in listed["untraced_steps"]}


def test_a_job_without_untraced_waits_keeps_its_bound(store: GraphStore, gpt: LoadedTrace,
                                                      agent_settings: Settings) -> None:
    b = questions.job_bound(store, gpt, agent_settings)
    assert b["shares_pct"]["untraced"] == 0.0 and steps.list_steps(store, gpt)["untraced_steps"] == []
