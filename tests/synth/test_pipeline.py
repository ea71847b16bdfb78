"""Tests for synth/pipeline.py: 1F1B orders, plain and interleaved."""

from __future__ import annotations

import pytest

from bottleneck_oracle.synth.pipeline import Unit, unit_order, warmup_forwards


def test_gradient_accumulation_without_pipeline() -> None:
    assert unit_order(1, 0, 2) == (Unit(True, 0, 0), Unit(False, 0, 0), Unit(True, 0, 1), Unit(False, 0, 1))


def test_one_f_one_b_warmup_steady_cooldown() -> None:
    order = unit_order(4, 0, 6)
    text = "".join("F" if u.forward else "B" for u in order)
    assert text == "FFF" + "FB" * 3 + "BBB"
    assert "".join("F" if u.forward else "B" for u in unit_order(4, 3, 6)) == "FB" * 6
    assert [warmup_forwards(4, s, 6, 1) for s in range(4)] == [3, 2, 1, 0]
    assert warmup_forwards(4, 0, 2, 1) == 2


@pytest.mark.parametrize(("pp", "m", "v"), [(2, 4, 1), (4, 8, 1), (4, 3, 1), (2, 4, 2), (4, 8, 2)])
def test_every_pass_runs_once_and_backward_follows_its_forward(pp: int, m: int, v: int) -> None:
    for stage in range(pp):
        order = unit_order(pp, stage, m, v)
        assert len(order) == 2 * m * v and len(set(order)) == len(order)
        position = {u: i for i, u in enumerate(order)}
        for u in order:
            if not u.forward:
                assert position[Unit(True, u.chunk, u.microbatch)] < position[u]


def test_interleaved_chunks_alternate_in_groups_of_pp() -> None:
    forwards = [(u.chunk, u.microbatch) for u in unit_order(2, 1, 4, 2) if u.forward]
    assert forwards == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    assert warmup_forwards(2, 0, 4, 2) == 4 and warmup_forwards(2, 1, 4, 2) == 2
