"""Tests for gnn/edits.py: edits change the edited nodes' features or the moved edges, nothing else."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.gnn.data import COLUMN as _C
from bottleneck_oracle.gnn.data import step_graphs
from bottleneck_oracle.gnn.edits import edit_features, rewire
from tests.analysis.synth_cases import synth_case


def _case():  # type: ignore[no-untyped-def]
    a, _ = synth_case("tiny", dp=2)
    return a


def test_edit_shortens_only_the_edited_nodes() -> None:
    g = step_graphs(_case())[0]
    edited = g.x[:, _C["class_gemm"]] == 1
    faster = edit_features(g, edited, 2.0, step_ms=1.0)
    dur = np.expm1(g.x[:, _C["log_dur_us"]].astype(np.float64))
    new = np.expm1(faster.x[:, _C["log_dur_us"]].astype(np.float64))
    assert np.allclose(new[edited], dur[edited] / 2, rtol=1e-4)
    assert np.array_equal(faster.x[~edited][:, _C["log_dur_us"]], g.x[~edited][:, _C["log_dur_us"]])
    assert (faster.x[edited, _C["edit_log_speedup"]] == np.float32(np.log(2.0))).all()
    assert not faster.has_labels and faster.step_ms == 1.0 and g.has_labels
    removed = edit_features(g, edited, float("inf"))
    assert (removed.x[edited, _C["dur_ms"]] == 0).all() and (removed.x[edited, _C["removed"]] == 1).all()


def test_rewire_moves_an_edge_and_its_reverse() -> None:
    g = step_graphs(_case())[0]
    key = ("kernel", "stream_next", "kernel")
    u, v = (int(i) for i in g.edges[key][:, 0])
    w = int(g.edges[key][1, -1])
    moved = rewire(g, remove=((u, v),), add=((u, "stream_next", w),))
    pairs = {k: set(map(tuple, p.T.tolist())) for k, p in moved.edges.items()}
    assert (u, v) not in pairs[key] and (v, u) not in pairs[("kernel", "rev_stream_next", "kernel")]
    assert (u, w) in pairs[key] and (w, u) in pairs[("kernel", "rev_stream_next", "kernel")]
    assert sum(p.shape[1] for p in moved.edges.values()) == sum(p.shape[1] for p in g.edges.values())
    assert not moved.has_labels and np.array_equal(moved.x, g.x)
    with pytest.raises(ValueError, match="unknown relation"):
        rewire(g, add=((u, "teleport", w),))
    with pytest.raises(ValueError, match="outside"):
        rewire(g, remove=((u, len(g)),))
