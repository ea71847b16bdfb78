"""Tests for graph/op_classes.py: names to op classes, first match first."""

from __future__ import annotations

import pytest

from bottleneck_oracle.graph.op_classes import OP_CLASSES, classify_strings, op_class_mask
from bottleneck_oracle.truth.edits import OP_CLASS_NAMES
from tests.conftest import REPO


def test_the_first_matching_pattern_wins() -> None:
    names = ("aten::addmm", "aten::add_", "flash_fwd_kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
             "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "something else")
    op, coll, bucket = classify_strings(names)
    classes = [OP_CLASSES[i][0] if i >= 0 else None for i in op.tolist()]
    assert classes == ["gemm", "elementwise", "attention", None, "dataloader", None]
    assert coll.tolist()[3] >= 0 and coll.tolist()[0] == -1 and ((0 <= bucket) & (bucket < 16)).all()


def test_the_edit_language_names_the_same_classes() -> None:
    assert OP_CLASS_NAMES == tuple(c for c, _ in OP_CLASSES)


def test_an_unknown_class_is_refused() -> None:
    from bottleneck_oracle.graph.build import build_graph
    from bottleneck_oracle.traces import read_trace

    g = build_graph(read_trace(REPO / "examples" / "gpt_2rank"))
    assert op_class_mask(g, "gemm").any()
    with pytest.raises(ValueError, match="unknown op class 'conv'"):
        op_class_mask(g, "conv")
