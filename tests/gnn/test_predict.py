from __future__ import annotations

import pytest

from bottleneck_oracle.gnn.predict import SHIPPED_CHECKPOINT, Predictor
from bottleneck_oracle.graph.types import NodeKind
from bottleneck_oracle.replay.engine import Edit
from tests.analysis.synth_cases import synth_case


def test_the_shipped_checkpoint_predicts_a_step_and_its_critical_nodes() -> None:
    a, _ = synth_case("gpt2-small", dp=2)
    predictor = Predictor()
    assert predictor.checkpoint.train["config"]["seed"] == 0
    predictions = predictor.predict(a)
    assert [p.step for p in predictions] == [1, 2, 3, 4]
    walls = {r.step: 0 for r in a.steps}
    for r in a.steps:
        walls[r.step] = max(walls[r.step], r.wall_ns / 1e6)
    for p in predictions:
        assert p.step_ms == pytest.approx(walls[p.step], rel=0.1)
        assert p.replay_ms == pytest.approx(walls[p.step], rel=1e-6)
        assert len(p.on_path) == len(p.node) and ((p.on_path >= 0) & (p.on_path <= 1)).all()
        assert p.latency_ms > 0
    assert (SHIPPED_CHECKPOINT / "config.json").is_file()


def test_the_shipped_checkpoints_walk_finds_the_critical_path_of_a_gpu_bound_step() -> None:
    from scipy.stats import spearmanr

    from bottleneck_oracle.gnn.data import step_graphs

    a, _ = synth_case("gpt2-small", dp=2)
    predictor = Predictor()
    for g in step_graphs(a):
        p = predictor.predict_graph(g)
        walked = p.on_path >= 0.5
        assert (walked & g.on_path).sum() / (walked | g.on_path).sum() > 0.85
        assert spearmanr(p.share, g.share).statistic > 0.9
        assert (p.share[~walked] == 0).all() and (p.share[walked] > 0).any()


def test_a_rewired_graph_is_predicted_on_its_new_edges() -> None:
    from bottleneck_oracle.gnn.data import step_graphs
    from bottleneck_oracle.gnn.edits import rewire

    a, _ = synth_case("gpt2-small", dp=2)
    g = step_graphs(a)[1]
    predictor = Predictor()
    before = predictor.predict_graph(g)
    # the collectives no longer join the ranks: the walk cannot cross to the peer any more
    pairs = g.edges[("comm", "collective", "comm")]
    cut = predictor.predict_graph(rewire(g, remove=tuple((int(u), int(v)) for u, v in pairs.T)))
    assert not (before.on_path == cut.on_path).all()


def test_a_faster_kernel_class_predicts_a_shorter_step() -> None:
    a, _ = synth_case("gpt2-small", dp=2)
    predictor = Predictor()
    before = predictor.predict(a, steps=(2,))
    after = predictor.predict(a, [Edit(4.0, kinds=(NodeKind.KERNEL,), name="gemm")], steps=(2,))
    assert [p.step for p in after] == [2]
    assert after[0].step_ms < before[0].step_ms
    assert after[0].corrected_ms < before[0].corrected_ms
    assert after[0].replay_ms < before[0].replay_ms


def test_a_faster_allreduce_gives_back_the_interference_replay_keeps() -> None:
    from bottleneck_oracle.synth.whatif import whatif
    from bottleneck_oracle.truth.edits import Edit as SynthEdit

    a, manifest = synth_case("gpt2-small", dp=2)  # its all-reduces overlap backward kernels
    truth = whatif(manifest.config, SynthEdit.scale(2.0, op="allreduce")).edited.job_step_ms()
    (p,) = Predictor().predict(a, [Edit(2.0, kinds=(NodeKind.COMM,), collective="allreduce")], steps=(2,))
    assert p.interference_ms < 0 and p.corrected_ms == pytest.approx(p.replay_ms + p.interference_ms)
    assert abs(p.corrected_ms / truth[2] - 1) < abs(p.replay_ms / truth[2] - 1)
    (observed,) = Predictor().predict(a, steps=(2,))
    assert observed.interference_ms == 0.0 and observed.corrected_ms == observed.replay_ms


def test_predictor_takes_a_checkpoint_folder(tiny_checkpoint, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.gnn.train import save_checkpoint

    folder = save_checkpoint(tiny_checkpoint, tmp_path / "ckpt")
    a, _ = synth_case("tiny", dp=2)
    from_folder, from_object = Predictor(folder).predict(a), Predictor(tiny_checkpoint).predict(a)
    assert [p.step_ms for p in from_folder] == pytest.approx([p.step_ms for p in from_object])
