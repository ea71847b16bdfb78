"""Tests for synth/schedule.py: the simulation, interference and true step times."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.program import Dep, Graph, Kind, Lane
from bottleneck_oracle.synth.schedule import run, simulate, solve, topological_order


def test_solve_follows_the_latest_constraint() -> None:
    g = Graph()
    a = g.add(0, Lane.MAIN, Kind.GAP, -1, 100, 0)
    b = g.add(0, Lane.MAIN, Kind.GAP, -1, 50, 0)
    c = g.add(0, Lane.MAIN, Kind.GAP, -1, 10, 0)
    g.dep(b, a, Dep.START_AFTER_START, 30)
    g.dep(c, a, Dep.START_AFTER_END, 5)
    g.dep(c, b, Dep.END_AFTER_END, 200)
    p = g.freeze()
    start, end = solve(p, topological_order(p), p.dur_ns)
    assert start.tolist() == [0, 30, 105] and end.tolist() == [100, 80, 280]


def test_a_cycle_is_an_internal_error() -> None:
    g = Graph()
    a = g.add(0, Lane.MAIN, Kind.GAP, -1, 1, 0)
    b = g.add(0, Lane.MAIN, Kind.GAP, -1, 1, 0)
    g.dep(a, b, Dep.START_AFTER_END)
    g.dep(b, a, Dep.START_AFTER_END)
    with pytest.raises(AssertionError, match="deadlocks"):
        topological_order(g.freeze())


def test_simulate_is_deterministic_and_seeded() -> None:
    config = SynthConfig(model="gpt2-small", dp=2, tp=2, microbatches=2, steps=3)
    a, b = simulate(config), simulate(config)
    assert np.array_equal(a.step_ms, b.step_ms) and a.steps == (1, 2, 3)
    assert not np.array_equal(a.step_ms, simulate(config.with_changes(seed=1)).step_ms)
    assert a.by_rank()[3][2] == a.ms(2, 3) and a.job_step_ms()[2] == a.step_ms[:, 1].max()


def test_step_time_covers_the_gpu_tail() -> None:
    result, tl = run(SynthConfig(model="1b", steps=2, noise=0.0))
    p = tl.program
    for rank, step, first, last in p.step_marks:
        gpu = (p.rank == rank) & (p.step == step) & (p.launcher >= 0)
        expected = max(tl.end_ns[last], tl.end_ns[gpu].max()) - tl.start_ns[first]
        assert result.step_ms[rank, step] == pytest.approx(expected / 1e6)
    assert (np.diff([tl.start_ns[m[2]] for m in p.step_marks]) > 0).all()


def test_interference_slows_compute_that_overlaps_transfers() -> None:
    config = SynthConfig(model="1b", dp=8, microbatches=1, steps=2)
    calm = simulate(config.with_changes(interference=0.0)).step_ms
    busy = simulate(config).step_ms
    assert (busy > calm).all()
    _, tl = run(config)
    kernels = tl.program.kind == Kind.KERNEL
    assert (tl.dur_ns[kernels] >= tl.program.dur_ns[kernels]).all()
    assert (tl.dur_ns[kernels] > tl.program.dur_ns[kernels]).sum() > 10  # backward GEMMs beside gradient buckets
