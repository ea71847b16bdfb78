"""Tests of the synthetic straggler jobs: the dependency rules, read back from the table alone, the layout,
the injected stragglers and their ground truth, reproducibility, size and spec validation."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.straggler_jobs import StragglerCause, StragglerJobSpec, generate, write_job

EPS = 1e-9  # start + duration is recomputed from the table: allow float rounding, far below the 1 us launch gap
REAL_ST = Path("/work/shared/traces/stragglers/ST/trace.parquet")
COLUMNS = {"dp_rank": pa.int32(), "stage": pa.int32(), "rank": pa.int32(), "step": pa.int64(),
           "optype": pa.dictionary(pa.int8(), pa.string()), "start_ts": pa.float64(), "duration": pa.float64(),
           "seq_id": pa.int32(), "mc": pa.int32(), "mb_id": pa.int32(), "gmc": pa.int32()}


def _times(table: pa.Table) -> dict[tuple, tuple[float, float, int]]:
    """(step, dp_rank, stage, optype, seq_id) -> (start, end, end in integer ns as a ns reader sees it) per row."""
    c = table.to_pydict()
    return {(c["step"][i], c["dp_rank"][i], c["stage"][i], c["optype"][i], c["seq_id"][i]):
            (c["start_ts"][i], c["start_ts"][i] + c["duration"][i], round(c["start_ts"][i] * 1e9)
             + round(c["duration"][i] * 1e9)) for i in range(table.num_rows)}


def _one_f_one_b(pp: int, stage: int, m: int) -> list[tuple[str, int]]:
    warmup = min(pp - stage - 1, m)
    order = [("forward-compute", k) for k in range(warmup)]
    for k in range(m - warmup):
        order += [("forward-compute", warmup + k), ("backward-compute", k)]
    return order + [("backward-compute", k) for k in range(m - warmup, m)]


def _worker_waits(dp: int, pp: int, m: int, stage: int) -> list[tuple[tuple[str, int], tuple[str, int]]]:
    """(op, what it must start after) inside one worker and step: rules 1-5 and 8 of the module."""
    order = _one_f_one_b(pp, stage, m)
    waits = list(zip(order[1:], order[:-1]))
    first_b = order.index(("backward-compute", 0))
    early = order[first_b - 2] if first_b >= 2 else None
    for k in range(m):
        before = [("forward-compute", k - 1), ("forward-recv", k - 1)] if k else [("params-all-gather", 0)]
        if stage > 0:
            waits += [(("forward-recv", k), w) for w in before] + [(("forward-compute", k), ("forward-recv", k))]
            waits += [(("backward-send", k), ("backward-compute", k)), (("backward-send", k), ("backward-send", k - 1))]
        if stage < pp - 1:
            waits += [(("forward-send", k), ("forward-compute", k)), (("forward-send", k), ("forward-send", k - 1))]
            recv_k = ("backward-recv", k)
            waits += [(recv_k, ("backward-compute", k - 1)), (recv_k, ("backward-recv", k - 1))]
            waits += [(("backward-compute", k), recv_k)]
    if early:
        waits += [(("backward-recv", 0), early), (("backward-send", 0), early)]
    tail = [order[-1], ("gc", 0), ("layernorm-grads-all-reduce", 0)]
    tail += [("embedding-grads-all-reduce", 0)] if stage in (0, pp - 1) else []
    tail += [("grads-reduce-scatter", 0)] if dp > 1 else []
    tail += [("optimizer-clip-main-grad", 0), ("optimizer", 0)]
    waits += list(zip(tail[1:], tail[:-1])) + [(("forward-compute", 0), ("params-all-gather", 0))]
    return waits


def _violations(table: pa.Table, dp: int, pp: int, m: int) -> list[str]:
    """Every broken dependency rule of the table, as a line each (a replay of the module's rules 1-9)."""
    times, bad = _times(table), []
    steps = sorted({key[0] for key in times})
    for step in steps:
        for dp_rank in range(dp):
            for stage in range(pp):
                for op, dep in _worker_waits(dp, pp, m, stage):
                    a, b = times.get((step, dp_rank, stage, *op)), times.get((step, dp_rank, stage, *dep))
                    if a is not None and b is not None and a[0] < b[1] - EPS:
                        bad.append(f"step {step} ({dp_rank},{stage}): {op} starts before {dep} ends")
        pairs = [(("forward-send", s, k), ("forward-recv", s + 1, k)) for s in range(pp - 1) for k in range(m)]
        pairs += [(("backward-send", s, k), ("backward-recv", s - 1, k)) for s in range(1, pp) for k in range(m)]
        pairs += [(("embedding-grads-all-reduce", 0, 0), ("embedding-grads-all-reduce", pp - 1, 0))]
        for dp_rank in range(dp):
            for (op_a, s_a, k_a), (op_b, s_b, k_b) in pairs:
                a, b = times[(step, dp_rank, s_a, op_a, k_a)], times[(step, dp_rank, s_b, op_b, k_b)]
                if abs(a[1] - b[1]) > EPS or a[2] != b[2] or a[1] <= max(a[0], b[0]):
                    bad.append(f"step {step} dp {dp_rank}: {op_a} {s_a}/{k_a} and its peer do not end together")
        groups = [[(dp_rank, s) for dp_rank in range(dp) for s in range(pp)]]
        synced = ["optimizer-clip-main-grad"] + (["params-all-gather", "grads-reduce-scatter"] if dp > 1 else [])
        for optype in synced:
            for group in groups if optype == "optimizer-clip-main-grad" else [[(d, s) for d in range(dp)]
                                                                              for s in range(pp)]:
                ends = [times[(step, d, s, optype, 0)][1] for d, s in group]
                starts = [times[(step, d, s, optype, 0)][0] for d, s in group]
                ends_ns = {times[(step, d, s, optype, 0)][2] for d, s in group}
                if max(ends) - min(ends) > EPS or len(ends_ns) > 1 or min(ends) <= max(starts):
                    bad.append(f"step {step}: {optype} of {group} does not end together after every start")
    first = {step: min(v[0] for k, v in times.items() if k[0] == step) for step in steps}
    last = {step: max(v[1] for k, v in times.items() if k[0] == step) for step in steps}
    bad += [f"step {b} starts before step {a} ends" for a, b in zip(steps, steps[1:]) if first[b] <= last[a]]
    return bad


def _step_times(table: pa.Table) -> np.ndarray:
    step = table.column("step").to_numpy()
    end = table.column("start_ts").to_numpy() + table.column("duration").to_numpy()
    start = table.column("start_ts").to_numpy()
    return np.array([end[step == s].max() - start[step == s].min() for s in np.unique(step)])


def _compute_durations(table: pa.Table, dp_rank: int, stage: int) -> np.ndarray:
    optype = np.array(table.column("optype").to_pylist())
    mask = (np.isin(optype, ["forward-compute", "backward-compute"]) & (table.column("dp_rank").to_numpy() == dp_rank)
            & (table.column("stage").to_numpy() == stage))
    return table.column("duration").to_numpy()[mask]


@pytest.mark.parametrize(("dp", "pp", "m"), [(2, 4, 8), (1, 3, 2), (3, 1, 4), (2, 2, 1), (2, 5, 3)])
def test_generate_obeys_every_dependency_rule(dp: int, pp: int, m: int) -> None:
    spec = StragglerJobSpec(dp=dp, pp=pp, microbatches=m, steps=3, seed=7, noise=0.1, uneven_microbatches=0.3,
                            slow_workers=((dp - 1, pp - 1, 1.7),), slow_stages=((0, 1.2),))
    table, _, _ = generate(spec)
    assert _violations(table, dp, pp, m) == []


def test_violations_catches_an_op_moved_earlier() -> None:
    table, _, _ = generate(StragglerJobSpec(dp=2, pp=3, microbatches=4, steps=2))
    optype = np.array(table.column("optype").to_pylist())
    row = np.flatnonzero((optype == "backward-compute") & (table.column("stage").to_numpy() == 1))[2]
    start = table.column("start_ts").to_numpy().copy()
    start[row] -= 0.05
    moved = table.set_column(table.schema.get_field_index("start_ts"), "start_ts", pa.array(start))
    assert any("backward-compute" in line for line in _violations(moved, 2, 3, 4))


def test_generate_columns_counts_and_meta() -> None:
    dp, pp, tp, m, steps = 3, 4, 2, 5, 2
    table, meta, _ = generate(StragglerJobSpec(dp=dp, pp=pp, tp=tp, microbatches=m, steps=steps))
    assert {name: table.schema.field(name).type for name in table.column_names} == COLUMNS
    assert list(table.column_names) == list(COLUMNS)
    assert meta["world_size"] == meta["dp_size"] * meta["pp_size"] * meta["tp_size"] * meta["dsp_size"] == 24
    assert (meta["run_id"], meta["vpp_size"]) == (0, 1)
    c = {name: np.array(table.column(name).to_pylist()) for name in table.column_names}
    counts = defaultdict(int)
    for key in zip(c["step"], c["dp_rank"], c["stage"]):
        counts[key] += 1
    for (_, _, stage), count in counts.items():
        p2p = 2 * m * (int(stage > 0) + int(stage < pp - 1))
        tail = 2 + int(stage in (0, pp - 1)) + 2 + 2  # gc, layernorm, [embedding], gather, reduce-scatter, clip, opt
        assert count == 2 * m + p2p + tail
    assert len(counts) == steps * dp * pp
    assert (c["rank"] == (c["stage"] * dp + c["dp_rank"]) * tp).all()
    is_compute = np.isin(c["optype"], ["forward-compute", "backward-compute"])
    assert (c["mb_id"][is_compute] == c["seq_id"][is_compute]).all() and set(c["mb_id"][is_compute]) == set(range(m))
    assert set(c["mb_id"][~is_compute & (c["optype"] != "gc")]) == {-1} and set(c["mb_id"][c["optype"] == "gc"]) == {0}
    assert (c["gmc"] == np.where(is_compute, c["stage"], -1)).all()
    assert set(c["step"]) == set(range(c["step"].min(), c["step"].min() + steps))


@pytest.mark.skipif(not REAL_ST.exists(), reason="the real StragglerAnalysis tables are not on this machine")
def test_generate_uses_the_conventions_of_the_real_tables() -> None:
    real = pq.read_table(REAL_ST)
    table, _, _ = generate(StragglerJobSpec(dp=2, pp=4, steps=2))

    def conventions(t: pa.Table) -> dict[str, tuple]:
        c = {name: t.column(name).to_pylist() for name in ("optype", "mc", "gmc", "mb_id")}
        by_optype = defaultdict(set)
        for optype, mc, gmc, mb_id in zip(c["optype"], c["mc"], c["gmc"], c["mb_id"]):
            by_optype[optype].add((mc, gmc >= 0, mb_id >= 0))
        return dict(by_optype)

    assert conventions(table) == conventions(real)
    assert set(table.column_names) == set(real.column_names)


def test_slow_worker_lengthens_steps_by_its_compute() -> None:
    clean_spec = StragglerJobSpec(dp=4, pp=4, steps=4, seed=3)
    slow_spec = StragglerJobSpec(dp=4, pp=4, steps=4, seed=3, slow_workers=((2, 1, 1.5),))
    clean, _, _ = generate(clean_spec)
    slow, _, truth = generate(slow_spec)
    assert (_step_times(slow) > _step_times(clean) * 1.2).all()
    ratio = _compute_durations(slow, 2, 1) / _compute_durations(clean, 2, 1)
    np.testing.assert_allclose(ratio, 1.5, rtol=1e-7)  # same draws: the factor, to the 1 ns grid of the times
    np.testing.assert_allclose(_compute_durations(slow, 1, 1), _compute_durations(clean, 1, 1), rtol=0, atol=1.5e-9)
    peer = np.median(_compute_durations(slow, 2, 1)) / np.median(_compute_durations(slow, 3, 1))
    assert 1.4 < peer < 1.6
    assert truth["cause"] == StragglerCause.SLOW_WORKER and truth["slow_workers"] == [[2, 1]]


def test_uneven_microbatches_share_one_factor_across_stages() -> None:
    table, _, truth = generate(StragglerJobSpec(dp=2, pp=3, steps=2, noise=0.0, uneven_microbatches=0.4))
    c = {name: np.array(table.column(name).to_pylist()) for name in ("optype", "dp_rank", "stage", "step", "mb_id",
                                                                      "duration")}
    forward = (c["optype"] == "forward-compute") & (c["step"] == c["step"].min()) & (c["dp_rank"] == 0)
    per_stage = [c["duration"][forward & (c["stage"] == s)] for s in range(3)]
    np.testing.assert_allclose(per_stage[0], per_stage[2], rtol=0, atol=1.5e-9)  # equal up to the 1 ns grid
    assert per_stage[0].std() / per_stage[0].mean() > 0.1
    assert truth["cause"] == StragglerCause.UNEVEN_MICROBATCHES


def test_truth_cause_is_the_injection_with_the_largest_effect() -> None:
    spec = StragglerJobSpec(dp=2, pp=4, steps=3, slow_workers=((0, 1, 1.05),), slow_stages=((3, 1.6),))
    _, _, truth = generate(spec)
    assert truth["cause"] == StragglerCause.STAGE_IMBALANCE
    assert truth["effects_s"]["stage_imbalance"] > truth["effects_s"]["slow_worker"] > 0
    assert (truth["slow_workers"], truth["slow_stages"]) == ([[0, 1]], [3])
    _, _, clean = generate(StragglerJobSpec(dp=2, pp=4))
    assert (clean["cause"], clean["slow_workers"], clean["effects_s"]) == ("none", [], {})


def test_generate_same_seed_same_table() -> None:
    spec = StragglerJobSpec(dp=2, pp=3, steps=2, seed=11, uneven_microbatches=0.2)
    assert generate(spec)[0].equals(generate(spec)[0])
    other = StragglerJobSpec(dp=2, pp=3, steps=2, seed=12, uneven_microbatches=0.2)
    assert not generate(spec)[0].equals(generate(other)[0])


def test_write_job_writes_table_meta_and_truth(tmp_path: Path) -> None:
    spec = StragglerJobSpec(dp=2, pp=2, steps=2, slow_stages=((1, 1.3),))
    folder = write_job(spec, tmp_path / "job")
    table, meta, truth = generate(spec)
    assert pq.read_table(folder / "trace.parquet").equals(table)
    assert yaml.safe_load((folder / "meta.yaml").read_text()) == meta
    written = json.loads((folder / "truth.json").read_text())
    assert written == truth and written["spec"]["slow_stages"] == [[1, 1.3]]


def test_generate_builds_a_4096_worker_job() -> None:
    dp, pp, tp, m, steps = 64, 8, 8, 16, 20
    table, meta, _ = generate(StragglerJobSpec(dp=dp, pp=pp, tp=tp, microbatches=m, steps=steps,
                                               slow_workers=((5, 3, 1.3),)))
    per_replica_step = pp * 2 * m + 2 * m * 2 * (pp - 1) + pp * 6 + 2  # computes, p2p, tail and 2 embeddings
    assert table.num_rows == steps * dp * per_replica_step
    assert meta["world_size"] == 4096
    assert len(np.unique(table.column("rank").to_numpy())) == dp * pp


@pytest.mark.parametrize("kwargs", [
    {"dp": 0, "pp": 2}, {"dp": 2, "pp": 2.0}, {"dp": True, "pp": 2}, {"dp": 2, "pp": 2, "microbatches": 0},
    {"dp": 2, "pp": 2, "steps": -1}, {"dp": 2, "pp": 2, "seed": -3}, {"dp": 2, "pp": 2, "forward_s": 0.0},
    {"dp": 2, "pp": 2, "p2p_s": float("nan")}, {"dp": 2, "pp": 2, "noise": -0.1},
    {"dp": 2, "pp": 2, "uneven_microbatches": float("inf")}, {"dp": 2, "pp": 2, "slow_workers": ((2, 0, 1.5),)},
    {"dp": 2, "pp": 2, "slow_workers": ((0, 0, 0.5),)}, {"dp": 2, "pp": 2, "slow_workers": ((0, 0),)},
    {"dp": 2, "pp": 2, "slow_workers": (0, 0, 1.5)}, {"dp": 2, "pp": 2, "slow_workers": ((0, 1, 2), (0, 1, 3))},
    {"dp": 2, "pp": 2, "slow_stages": ((2, 1.5),)}, {"dp": 2, "pp": 2, "slow_stages": ((1, "x"),)},
    {"dp": 2, "pp": 2, "slow_stages": ((1, 1.5), (1, 2.0))},
])
def test_spec_rejects_bad_values(kwargs: dict) -> None:
    with pytest.raises(ConfigError) as caught:
        StragglerJobSpec(**kwargs)
    assert str(caught.value).startswith("StragglerJobSpec: ") and "\n" not in str(caught.value)
