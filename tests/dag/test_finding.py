from __future__ import annotations

import numpy as np

from bottleneck_oracle.dag.critical_path import StepReport
from bottleneck_oracle.dag.finding import CAT_INDEX, ms, own_ns, top_ops
from bottleneck_oracle.dag.types import Category
from tests.dag.synth_cases import synth_case


def test_ms_rounds_to_microseconds() -> None:
    assert ms(1_234_567) == 1.235 and ms(0) == 0.0


def test_own_ns_counts_only_the_steps_own_rank() -> None:
    cat = np.array([CAT_INDEX[Category.CPU]] * 3, dtype=np.int8)
    r = StepReport(1, 0, 0, 60, {c: 0 for c in Category}, np.array([1, 2, 3]), cat,
                   np.array([0, 1, 0], dtype=np.int32), np.array([0, 10, 30]), np.array([10, 20, 30]), 0, 1)
    assert own_ns(r, Category.CPU) == 40 and own_ns(r, Category.IDLE) == 0


def test_top_ops_orders_by_critical_time() -> None:
    a, _ = synth_case("gpt2-small", dp=2)
    r = a.steps[0]
    names = top_ops(a.graph, r, r.path_node >= 0, k=3)
    assert len(names) == 3 and all(isinstance(n, str) and n for n in names)
