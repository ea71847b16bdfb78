"""Interference levers: overlap against a brute-force count, and the generator's own slowdown recovered."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.replay.interference import interference_levers, transfer_overlap
from bottleneck_oracle.graph.types import EdgeType, NodeKind
from bottleneck_oracle.replay.engine import Edit, replay
from bottleneck_oracle.synth.whatif import whatif
from bottleneck_oracle.truth.edits import Edit as SynthEdit
from tests.analysis.synth_cases import synth_case


def test_overlap_is_each_kernels_time_under_its_ranks_transfers() -> None:
    a, _ = synth_case("gpt2-small", dp=2)  # DDP all-reduces overlap backward kernels
    g, pg = a.graph, a.points
    kernels = np.flatnonzero(g.kind == NodeKind.KERNEL)
    got = transfer_overlap(a, pg.t, pg.weight, kernels)
    transfer = np.flatnonzero((pg.origin == EdgeType.COLLECTIVE) & (pg.src >= 2 * len(g)))
    for k in kernels[np.linspace(0, len(kernels) - 1, 60).astype(int)]:
        lo, hi = pg.t[2 * k], pg.t[2 * k + 1]
        mine = transfer[pg.rank[transfer] == g.rank[k]]
        covered = np.zeros(max(hi - lo, 0) // 1000 + 1, dtype=bool)  # 1 µs cells (the synthetic clock's unit)
        for e in mine:
            s, end = pg.t[pg.src[e]], pg.t[pg.src[e]] + pg.weight[e]
            covered[max(s - lo, 0) // 1000: max(min(end, hi) - lo, 0) // 1000] = True
        assert got[kernels == k][0] == pytest.approx(covered[: (hi - lo) // 1000].sum() * 1000, abs=2000)
    assert got.max() > 0


def test_no_edit_moves_no_lever_and_replays_the_observed_steps() -> None:
    a, _ = synth_case("gpt2-small", dp=2)
    levers = interference_levers(a, [])
    assert not levers.lever_ns.any()
    observed = replay(a, [])
    assert levers.step_ms == pytest.approx({s: max(observed.after_ns[observed.step == s]) / 1e6
                                            for s in levers.step_ms})


def test_levers_at_the_generators_interference_recover_what_replay_misses() -> None:
    a, manifest = synth_case("gpt2-small", dp=2)
    truth = whatif(manifest.config, SynthEdit.scale(2.0, op="allreduce")).edited.job_step_ms()
    levers = interference_levers(a, [Edit(2.0, kinds=(NodeKind.COMM,), collective="allreduce")])
    # a shorter all-reduce overlaps less backward work: replay keeps that work's slowdown
    kernel_on_path = levers.lever_ns != 0
    assert (levers.lever_ns[kernel_on_path] < 0).mean() > 0.5
    assert (a.graph.kind[kernel_on_path] == NodeKind.KERNEL).all()
    replay_error, corrected_error = [], []
    for step, replayed in levers.step_ms.items():
        corrected = replayed + manifest.config.interference * levers.lever_ns[a.graph.step == step].sum() / 1e6
        replay_error.append(abs(replayed / truth[step] - 1))
        corrected_error.append(abs(corrected / truth[step] - 1))
    assert np.mean(corrected_error) < 0.5 * np.mean(replay_error)
