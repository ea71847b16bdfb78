"""Tests for replay/compile.py: node edits replayed exactly where the simulator adds no interference."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.replay.node_edits import select_nodes
from bottleneck_oracle.graph.types import EdgeType, NodeKind
from bottleneck_oracle.replay.engine import Edit as NodeEdit
from bottleneck_oracle.replay.engine import replay, weights_with
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import Selector, parse_edit
from bottleneck_oracle.replay.compile import compile_edits
from bottleneck_oracle.whatif.predict import predict_whatif
from bottleneck_oracle.whatif.verify import rerun_step_ms
from tests.whatif.cases import GPT2, job

EXACT = (*GPT2, ("interference", 0.0))  # no compute/communication interference: replay is the truth


def test_scale_compiles_to_the_replay_of_the_same_nodes() -> None:
    _, a = job("", EXACT)
    compiled = compile_edits(a, [parse_edit("scale op=gemm x2")], 2)
    mask = select_nodes(a.graph, Selector(op="gemm"))
    ours = replay(a, [], weight=weights_with(a.points, compiled.speedup, compiled.edge_scale, compiled.cut))
    theirs = replay(a, [NodeEdit(2.0, kinds=(NodeKind.KERNEL,), name="^sm90_xmma_gemm")])
    assert np.array_equal(ours.after_ns, theirs.after_ns) and compiled.touched == (int(mask.sum()),)
    assert compiled.nodes_only


@pytest.mark.parametrize("text", ["scale op=gemm x2", "scale op=attention x3", "scale op=gemm rank=0 x2"])
def test_node_edits_replay_exactly_where_nothing_interferes(text: str) -> None:
    folder, a = job("", EXACT)
    edit = parse_edit(text)
    predicted = predict_whatif(a, 2, [edit]).predicted_ms["replay"]
    if "rank=" in text:  # the simulator makes a whole op class faster, or nothing
        with pytest.raises(ConfigError, match="the simulator scales one kernel class"):
            rerun_step_ms(folder, [edit], 2)
        everywhere = predict_whatif(a, 2, [parse_edit("scale op=gemm x2")]).best_ms
        assert everywhere < predicted < predict_whatif(a, 2, [edit]).baseline_ms
        return
    assert predicted == pytest.approx(rerun_step_ms(folder, [edit], 2), rel=1e-3)  # measured: 0.000%


def test_set_gives_each_selected_node_its_time_and_remove_takes_what_it_ran() -> None:
    _, a = job("", EXACT)
    g = a.graph
    compiled = compile_edits(a, [parse_edit("set op=gemm 0.1")], 2)
    gemm = select_nodes(a.graph, Selector(op="gemm"))
    assert np.allclose(g.dur_ns[gemm] / compiled.speedup[gemm], 0.1e6)
    assert (compiled.speedup[~gemm] == 1).all()
    steps = compile_edits(a, [parse_edit("remove kind=annotation name=^ProfilerStep#2$")], 2)
    gone = np.isinf(steps.speedup)
    annotations = np.flatnonzero(gone & (g.kind == NodeKind.ANNOTATION) & (g.parent < 0))
    assert len(annotations) == 4  # one a rank
    main_lanes = np.isin(g.lane, g.lane[annotations]) & (g.step == 2)
    assert gone[main_lanes].all()  # what it ran on its thread
    src, dst = g.edges_of(EdgeType.LAUNCH)
    assert gone[dst[gone[src]]].all() and (g.kind[dst[gone[src]]] == NodeKind.KERNEL).any()  # what that launched
    assert not gone[g.step == 1].any()


def test_a_selector_that_picks_nothing_is_refused() -> None:
    _, a = job("", EXACT)
    with pytest.raises(ConfigError, match="the selector picks no node of this trace"):
        compile_edits(a, [parse_edit("scale name=^no_such_kernel$ x2")], 2)
    with pytest.raises(ConfigError, match="not a change of the graph's weights"):
        compile_edits(a, [parse_edit("microbatches=8")], 2)
