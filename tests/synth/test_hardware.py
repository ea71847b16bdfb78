"""Tests for synth/hardware.py: the GPU table and collective transfer times."""

from __future__ import annotations

import pytest

from bottleneck_oracle.synth.hardware import (
    GPUS_PER_NODE,
    HARDWARE,
    collective_time_s,
    same_node,
)


def test_hardware_table_has_the_three_gpus_with_sane_numbers() -> None:
    assert set(HARDWARE) == {"A100", "H100", "H200"}
    a100, h100, h200 = HARDWARE["A100"], HARDWARE["H100"], HARDWARE["H200"]
    assert a100.peak_flops == 312e12 and h100.peak_flops == h200.peak_flops == 989e12
    assert a100.hbm_bytes_per_s < h100.hbm_bytes_per_s < h200.hbm_bytes_per_s
    for hw in HARDWARE.values():
        assert hw.nvlink_bytes_per_s > hw.net_bytes_per_s > 0
        assert 0 < hw.efficiency <= 1 and hw.launch_latency_s > 0
    assert (a100.arch, h100.arch) == ("sm80", "sm90")


def test_same_node_splits_ranks_by_eight() -> None:
    assert GPUS_PER_NODE == 8
    assert same_node((0, 1, 7)) and not same_node((7, 8)) and same_node((8, 15))


def test_ring_all_reduce_inside_a_node_matches_the_formula() -> None:
    hw = HARDWARE["H100"]
    nbytes = 64e6
    expected = 2 * 3 / 4 * nbytes / 360e9 + 2 * 3 * 5e-6  # 2(n-1)/n · B / NVLink + 2(n-1) · alpha
    assert collective_time_s("allreduce", nbytes, (0, 1, 2, 3), hw) == pytest.approx(expected)
    assert expected == pytest.approx(296.67e-6, rel=1e-3)


def test_ring_all_reduce_across_nodes_uses_the_network() -> None:
    hw = HARDWARE["H100"]
    ranks = tuple(range(0, 32, 4))  # a data-parallel group of 8 ranks over 4 nodes
    nbytes = 404_783_104  # one 7b layer's bf16 gradients
    expected = 2 * 7 / 8 * nbytes / 45e9 + 2 * 7 * 10e-6
    assert collective_time_s("allreduce", nbytes, ranks, hw) == pytest.approx(expected)
    assert expected == pytest.approx(15.88e-3, rel=1e-3)


def test_reduce_scatter_all_gather_and_p2p_costs() -> None:
    hw = HARDWARE["A100"]
    ranks = (0, 1)
    assert collective_time_s("reducescatter", 8e6, ranks, hw) == pytest.approx(0.5 * 8e6 / 230e9 + 6e-6)
    assert collective_time_s("allgather", 8e6, ranks, hw) == collective_time_s("reducescatter", 8e6, ranks, hw)
    assert collective_time_s("sendrecv", 8e6, (0, 8), hw) == pytest.approx(8e6 / 23e9 + 12e-6)
    assert collective_time_s("allreduce", 8e6, (3,), hw) == 0.0


def test_unknown_collective_kind_is_refused() -> None:
    with pytest.raises(ValueError) as caught:
        collective_time_s("broadcast", 1.0, (0, 1), HARDWARE["H100"])
    assert "broadcast" in str(caught.value)
