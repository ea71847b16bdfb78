"""Tests for replay/structural.py (and its private _ring.py): data-parallel and micro-batch predictions
against the simulator re-run with the change (the truth), inside a node and across nodes, and the inputs
they refuse."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.longest_path import longest_path
from bottleneck_oracle.graph.types import EdgeType
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth import SynthConfig, simulate, synthesize
from bottleneck_oracle.synth.hardware import HARDWARE
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.replay._ring import network_of, read_layout
from bottleneck_oracle.replay.structural import data_parallel, microbatches, pipeline_microbatches
from tests.captured_data import captured
from tests.conftest import DATA

# GPU-bound jobs whose gradient all-reduces (data parallel) or bubbles (pipeline) move the step
DDP = SynthConfig(model="gpt2-small", steps=3)
PIPELINE = SynthConfig(model="gpt2-small", pp=4, steps=3)
CPU_BOUND_PIPELINE = SynthConfig(model="tiny", pp=4, microbatches=4, steps=3)  # tiny kernels, CPU launches bind
MAPE_LIMIT = 0.05  # measured 0.2-1.5% (data parallel), 0.2-2.7% across nodes, 0.2-1.1% (micro-batches)
# jobs whose ranks at the new degree fill more than one node of 8 GPUs (or came from more than one)
GPT2 = SynthConfig(model="gpt2-small", steps=3)
CROSS_NODE = {
    "dp2tp2pp2": GPT2.with_changes(dp=2, tp=2, pp=2, microbatches=4),
    "dp2tp2pp2_ar160": GPT2.with_changes(dp=2, tp=2, pp=2, microbatches=4,
                                         injections=("exposed_communication@2=160",)),
    "dp2pp2": GPT2.with_changes(dp=2, pp=2, microbatches=4),
    "dp4tp2pp2": GPT2.with_changes(dp=4, tp=2, pp=2, microbatches=4),
    "zero1_dp4": GPT2.with_changes(dp=4, distributed_optimizer=True),
    "dp4_mb32": GPT2.with_changes(dp=4, micro_batch=32),
    "a100_dp2_mb16": GPT2.with_changes(dp=2, micro_batch=16, hardware="A100"),
    "tiny_dp4": SynthConfig(model="tiny", dp=4, steps=3),
    "1b_dp2tp2": SynthConfig(model="1b", dp=2, tp=2, steps=3),
    "l40s_dp4_mb32": GPT2.with_changes(dp=4, micro_batch=32, hardware=replace(HARDWARE["H100"], name="NVIDIA L40S")),
}


def _analysis(tmp_path_factory: pytest.TempPathFactory, config: SynthConfig) -> Analysis:
    out = tmp_path_factory.mktemp("job")
    synthesize(out, config)
    return analyze(read_trace(out))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[SynthConfig, Analysis]]:
    configs = {
        "dp2": DDP.with_changes(dp=2), "dp4": DDP.with_changes(dp=4), "dp8": DDP.with_changes(dp=8),
        "zero1": DDP.with_changes(dp=2, distributed_optimizer=True),
        "pp4m4": PIPELINE.with_changes(microbatches=4), "pp4m8": PIPELINE.with_changes(microbatches=8),
        "tiny_pp4": CPU_BOUND_PIPELINE,
    }
    return {name: (config, _analysis(tmp_path_factory, config)) for name, config in configs.items()}


@pytest.fixture(scope="module")
def cross_node(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[SynthConfig, Analysis]]:
    return {name: (config, _analysis(tmp_path_factory, config)) for name, config in CROSS_NODE.items()}


def _replayed_ms(a: Analysis, weight_scale: np.ndarray) -> dict[int, float]:
    """step → the slowest rank's wall time on the point graph replayed with the multipliers."""
    t, _ = longest_path(a.points.index, np.rint(a.points.weight * weight_scale).astype(np.int64))
    out: dict[int, float] = {}
    for report in a.steps:
        first, last = report.window_points(t)
        out[report.step] = max(out.get(report.step, 0.0), (t[last] - t[first]) / 1e6)
    return out


def _mape(predicted: dict[int, float], truth: dict[int, float]) -> float:
    assert predicted.keys() == truth.keys()
    return float(np.mean([abs(predicted[s] - truth[s]) / truth[s] for s in truth]))


@pytest.mark.parametrize(("job", "dp"), [("dp2", 4), ("dp4", 8), ("dp8", 2), ("dp2", 8), ("dp4", 1), ("zero1", 4)])
def test_data_parallel_matches_the_resimulated_job(jobs: dict[str, tuple[SynthConfig, Analysis]], job: str,
                                                   dp: int) -> None:
    config, a = jobs[job]
    truth = simulate(config.with_changes(dp=dp)).job_step_ms()
    predicted = _replayed_ms(a, data_parallel(a, dp).weight_scale)
    assert _mape(predicted, truth) < MAPE_LIMIT
    before = np.mean(list(simulate(config).job_step_ms().values()))
    # the direction is right: a larger ring is slower, unless ZeRO-1's sharded optimizer gains more
    assert np.sign(np.mean(list(predicted.values())) - before) == np.sign(np.mean(list(truth.values())) - before)


@pytest.mark.parametrize(("job", "dp"), [("dp2", 4), ("dp4", 8)])
def test_data_parallel_keeping_the_global_batch_shrinks_per_rank_compute(
        jobs: dict[str, tuple[SynthConfig, Analysis]], job: str, dp: int) -> None:
    config, a = jobs[job]
    truth = simulate(config.with_changes(dp=dp, micro_batch=config.batch * config.dp // dp)).job_step_ms()
    predicted = _replayed_ms(a, data_parallel(a, dp, keep_global_batch=True).weight_scale)
    assert _mape(predicted, truth) < MAPE_LIMIT
    assert max(predicted.values()) < min(simulate(config).job_step_ms().values())


def test_data_parallel_at_the_traced_degree_changes_nothing(jobs: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    _, a = jobs["dp4"]
    rescaled = data_parallel(a, 4)
    assert np.allclose(rescaled.weight_scale, 1.0)
    assert rescaled.weight_scale.shape == a.points.weight.shape


def test_data_parallel_states_the_fitted_ring(jobs: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    _, a = jobs["dp2"]
    text = " ".join(data_parallel(a, 4).assumptions)
    assert "2 → 4" in text and "ring allreduce" in text and "GB/s" in text and "µs" in text
    zero = " ".join(data_parallel(jobs["zero1"][1], 4).assumptions)
    assert "ring reducescatter" in zero and "optimizer" in zero


def test_data_parallel_rescales_only_the_gradient_collectives(tmp_path_factory: pytest.TempPathFactory,
                                                              jobs: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    _, a = jobs["dp2"]
    scale = data_parallel(a, 4).weight_scale
    owner = a.points.owner[scale != 1.0]
    assert len(owner) and (a.graph.collective[owner] >= 0).all()
    # a tensor-parallel job has all-reduces, but none of them are gradients
    tensor_parallel = _analysis(tmp_path_factory, SynthConfig(model="tiny", tp=2, steps=2))
    with pytest.raises(ConfigError) as error:
        data_parallel(tensor_parallel, 4)
    assert "no gradient collectives" in str(error.value)


@pytest.mark.parametrize("dp", [0, -2])
def test_data_parallel_rejects_a_degree_below_one(jobs: dict[str, tuple[SynthConfig, Analysis]], dp: int) -> None:
    with pytest.raises(ConfigError) as error:
        data_parallel(jobs["dp2"][1], dp)
    assert "dp must be an integer >= 1" in str(error.value)


@pytest.mark.parametrize(("job", "dp", "spans"), [
    ("dp2tp2pp2", 4, "the pipeline links at 16 ranks span 2 nodes"),  # 8 → 16 ranks: the stages part
    ("dp2tp2pp2_ar160", 4, "the world group at 16 ranks spans 2 nodes"),  # and an all-reduce over every rank
    ("dp2pp2", 6, "1 of 2 data-parallel groups at 6 span up to 2 nodes"),  # 12 ranks: stage 1 is ranks 6-11
    ("dp4tp2pp2", 2, "the pipeline links at 8 ranks fit in one node"),  # 16 → 8 ranks: back into one node
    ("zero1_dp4", 16, "the data-parallel group at 16 spans 2 nodes"),
    ("dp4_mb32", 16, "the data-parallel group at 16 spans 2 nodes"),
    ("a100_dp2_mb16", 16, "23 GB/s per GPU and 12 µs a hop (200 Gb/s HDR per A100, assumed"),
    ("tiny_dp4", 16, "the data-parallel group at 16 spans 2 nodes"),
    ("1b_dp2tp2", 4, None),  # 8 ranks: every ring stays in its node
])
def test_data_parallel_across_nodes_matches_the_resimulated_job(
        cross_node: dict[str, tuple[SynthConfig, Analysis]], job: str, dp: int, spans: str | None) -> None:
    config, a = cross_node[job]
    truth = simulate(config.with_changes(dp=dp)).job_step_ms()
    rescaled = data_parallel(a, dp)
    assert _mape(_replayed_ms(a, rescaled.weight_scale), truth) < MAPE_LIMIT
    text = " ".join(rescaled.assumptions)
    assert "lower bound" not in text and "upper bound" not in text
    assert ("network" not in text) if spans is None else (spans in text)


def test_data_parallel_states_the_network_a_group_across_nodes_runs_over(
        jobs: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    _, a = jobs["dp4"]
    notes = data_parallel(a, 16).assumptions
    assert ("the data-parallel group at 16 spans 2 nodes: its ring runs over the network at 45 GB/s per GPU and "
            "10 µs a hop (400 Gb/s NDR per H100, assumed; the trace shows no network)") in notes
    assert not any("lower bound" in text for text in notes)
    assert not any("network" in text for text in data_parallel(a, 8).assumptions)  # 8 ranks: one node


def test_data_parallel_across_nodes_with_queued_buckets(jobs: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    # gradient buckets queue behind a slow network ring; NCCL, the simulator and the prediction run one
    # stream's transfers in order
    config, a = jobs["dp4"]
    truth = simulate(config.with_changes(dp=16)).job_step_ms()
    assert _mape(_replayed_ms(a, data_parallel(a, 16).weight_scale), truth) < MAPE_LIMIT


def test_data_parallel_keeps_an_injected_slow_send_as_a_delay(tmp_path_factory: pytest.TempPathFactory) -> None:
    # a pipeline bubble makes the step's first activation send 34 ms slower; at dp 4 the stages part onto
    # two nodes. Fitted as transfer, the slow send dragged the send's bandwidth down and shrank with the
    # network ratio: the step was predicted 34% faster than traced (it is slower)
    config = GPT2.with_changes(dp=2, tp=2, pp=2, hardware="A100", injections=("pipeline_bubble@2=34",))
    a = _analysis(tmp_path_factory, config)
    truth = simulate(config.with_changes(dp=4)).job_step_ms()
    rescaled = data_parallel(a, 4)
    predicted = _replayed_ms(a, rescaled.weight_scale)
    assert _mape(predicted, truth) < MAPE_LIMIT
    traced = _replayed_ms(a, np.ones_like(rescaled.weight_scale))
    assert predicted[2] > traced[2]  # the right direction: the send crosses nodes, the step is slower
    assert any("sendrecv instance(s) took over" in text for text in rescaled.assumptions)


def test_data_parallel_with_an_unknown_gpu_is_a_lower_bound_unless_given_the_network(
        cross_node: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    config, a = cross_node["l40s_dp4_mb32"]
    truth = simulate(config.with_changes(dp=16)).job_step_ms()
    unknown = data_parallel(a, 16)
    assert any("NVIDIA L40S" in text and "lower bound" in text for text in unknown.assumptions)
    assert max(_replayed_ms(a, unknown.weight_scale).values()) < min(truth.values())
    given = data_parallel(a, 16, net_gbps=45.0, net_latency_us=10.0)
    assert any("45 GB/s per GPU and 10 µs a hop (given;" in text for text in given.assumptions)
    assert not any("lower bound" in text for text in given.assumptions)
    assert _mape(_replayed_ms(a, given.weight_scale), truth) < MAPE_LIMIT


@pytest.mark.parametrize("changes", [{"net_gbps": 0.0}, {"net_latency_us": -1.0}])
def test_data_parallel_rejects_a_network_number_not_above_zero(jobs: dict[str, tuple[SynthConfig, Analysis]],
                                                                 changes: dict[str, float]) -> None:
    with pytest.raises(ConfigError) as error:
        data_parallel(jobs["dp2"][1], 16, **changes)
    assert "must be > 0" in str(error.value)


def test_network_of_reads_the_gpu_name_whatever_its_case() -> None:
    a100 = network_of(["nvidia a100-sxm4-80gb"])
    assert a100 is not None and "200 Gb/s HDR per A100" in a100.source
    assert (a100.bytes_per_s, a100.latency_s) == pytest.approx((23e9, 12e-6))
    h200 = network_of(["NVIDIA H200"])
    assert h200 is not None and (h200.bytes_per_s, h200.latency_s) == pytest.approx((45e9, 10e-6))
    assert network_of(["NVIDIA L40S"]) is None and network_of([]) is None  # unknown, or a CPU trace
    mixed = network_of(["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"])
    assert mixed is not None and mixed.bytes_per_s == pytest.approx(23e9)  # the slowest sets the ring
    given = network_of(["NVIDIA L40S"], net_gbps=25.0)
    assert given is not None and (given.bytes_per_s, given.latency_s) == pytest.approx((25e9, 10e-6))


def test_layout_puts_ranks_in_megatron_order_eight_to_a_node() -> None:
    # dp2 tp2 pp2 → dp4: each stage's 8 ranks fill a node, so the rings stay inside and the stages part
    layout = read_layout([(0, 2), (1, 3), (4, 6), (5, 7)], current=2, new=4, world=8)
    assert layout.megatron and layout.tp == 2 and layout.new_world == 16
    assert layout.new_group_nodes((0, 2)) == 1 and layout.new_group_nodes((5, 7)) == 1
    assert layout.new_link_nodes((0, 4)) == 2
    # dp2 pp2 → dp6: stage 1 is ranks 6-11, over a node's edge; a traced link stands for three
    layout = read_layout([(0, 1), (2, 3)], current=2, new=6, world=4)
    assert layout.new_group_nodes((0, 1)) == 1 and layout.new_group_nodes((2, 3)) == 2
    assert layout.stands_for(0) == [0, 2, 4] and layout.new_link_nodes((0, 2)) == 2
    # groups out of Megatron order: a new group spans as many nodes as it can
    odd = read_layout([(0, 3), (1, 2)], current=2, new=8, world=4)
    assert not odd.megatron and odd.new_group_nodes((0, 3)) == 2


@pytest.mark.parametrize(("job", "k", "keep"), [
    ("pp4m4", 8, True), ("pp4m8", 4, True), ("pp4m8", 2, True), ("pp4m4", 1, True), ("pp4m4", 8, False),
    ("tiny_pp4", 2, True), ("tiny_pp4", 8, True),
])
def test_microbatches_matches_the_resimulated_job(jobs: dict[str, tuple[SynthConfig, Analysis]], job: str, k: int,
                                                  keep: bool) -> None:
    config, a = jobs[job]
    edited = config.with_changes(microbatches=k)
    if keep:
        edited = edited.with_changes(micro_batch=config.batch * config.microbatches // k)
    truth = simulate(edited).job_step_ms()
    result = microbatches(a, k, keep_global_batch=keep)
    assert _mape(result.step_ms, truth) < MAPE_LIMIT


@pytest.mark.parametrize("job", ["pp4m4", "pp4m8", "tiny_pp4"])
def test_microbatches_at_the_traced_count_reproduces_the_trace(jobs: dict[str, tuple[SynthConfig, Analysis]],
                                                               job: str) -> None:
    config, a = jobs[job]
    assert pipeline_microbatches(a) == config.microbatches
    result = microbatches(a, config.microbatches)
    observed = {s: max(r.wall_ns for r in a.steps if r.step == s) / 1e6 for s in result.step_ms}
    assert _mape(result.step_ms, observed) < 0.005  # measured < 0.05%


def test_microbatches_shrink_the_bubble_and_say_how(jobs: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    _, a = jobs["pp4m4"]
    result = microbatches(a, 8)
    assert max(result.step_ms.values()) < min(microbatches(a, 4).step_ms.values())
    text = " ".join(result.assumptions)
    assert "1F1B over 4 stages" in text and "4 → 8" in text and "4/8" in text


def test_microbatches_rejects_a_job_without_pipeline_stages(jobs: dict[str, tuple[SynthConfig, Analysis]]) -> None:
    with pytest.raises(ConfigError) as error:
        microbatches(jobs["dp2"][1], 4)
    assert str(error.value).startswith("microbatches: the trace has no pipeline stages")


@pytest.mark.parametrize("k", [0, -1])
def test_microbatches_rejects_a_count_below_one(jobs: dict[str, tuple[SynthConfig, Analysis]], k: int) -> None:
    with pytest.raises(ConfigError) as error:
        microbatches(jobs["pp4m4"][1], k)
    assert "k must be an integer >= 1" in str(error.value)


def test_microbatches_rejects_an_interleaved_schedule(tmp_path: Path) -> None:
    synthesize(tmp_path, SynthConfig(model="tiny", pp=2, microbatches=2, interleave=True, steps=2))
    with pytest.raises(ConfigError) as error:
        microbatches(analyze(read_trace(tmp_path)), 4)
    assert "interleaved" in str(error.value)


def test_data_parallel_rescales_a_gloo_all_reduce_and_the_wait_behind_it() -> None:
    a = captured("gloo_clean")  # a real gloo job on CPU: 2 ranks, one tiny GPT (tests/captured_data.py)
    pg = a.points
    # a gloo collective's transfer is the lag of the wait leaving its arrival point: it goes with dp=1
    wait = (pg.origin == EdgeType.SYNC) & (pg.node[pg.src] < 0) & (pg.owner >= 0)
    assert wait.any() and np.all(data_parallel(a, 1).weight_scale[wait] == 0.0)
    # one message size: the bandwidth term alone, 2(D-1)/D over 2(n-1)/n = 1.75 from 2 to 8 ranks (an
    # all-reduce far slower than the rest keeps its extra time as a delay)
    eight = data_parallel(a, 8)
    assert np.median(eight.weight_scale[wait]) == pytest.approx(1.75) and (eight.weight_scale[wait] >= 1).all()
    assert any("pure bandwidth ratio" in text for text in eight.assumptions)


def test_microbatches_of_a_cpu_pipeline_capture() -> None:
    a = analyze(read_trace(DATA / "pipeline_eager_send"))  # a real gloo pipeline: 2 stages, 8 micro-batches
    assert pipeline_microbatches(a) == 8
    same = microbatches(a, 8)
    observed = {s: max(r.wall_ns for r in a.steps if r.step == s) / 1e6 for s in same.step_ms}
    # a real CPU job: the model reproduces its own trace, not the microsecond; the margin grows with the
    # run's own step-to-step spread (a loaded machine slows in bursts)
    walls = np.array(list(observed.values()))
    spread = float(np.median(np.abs(walls - np.median(walls))) / np.median(walls))
    assert abs(np.median(list(same.step_ms.values())) / np.median(walls) - 1) < 0.15 + 3 * spread
    more = microbatches(a, 16)  # each micro-batch keeps a fixed cost, so more of them take longer
    assert np.median(list(more.step_ms.values())) > np.median(list(same.step_ms.values()))
    assert any("gloo pipeline" in text for text in more.assumptions)
