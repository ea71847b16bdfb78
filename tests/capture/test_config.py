"""Tests for capture/config.py: what a capture may inject, config checks with one-line messages."""

from __future__ import annotations

from typing import Any

import pytest

from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.injection import Injection


def test_capture_parse_injection_refuses_what_a_capture_cannot_inject() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_injection("pipeline_bubble@3")
    assert "unknown category 'pipeline_bubble'" in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"injections": (Injection("host_pause", 1),)}, "ProfilerStep#2 to #9 are"),
        ({"injections": (Injection("host_pause", 3, (2,)),)}, "rank 2 >= ranks (2)"),
        ({"injections": (Injection("exposed_communication", 3, (1,)),)}, "drop the rank list"),
        (
            {"injections": (Injection("host_pause", 3), Injection("host_pause", 3, (1,)))},
            "same step and rank",
        ),
        ({"heads": 3}, "heads (3) must divide d_model (128)"),
        ({"ranks": 3, "pipeline": 2}, "ranks (3) must be a multiple of the pipeline stages (2)"),
        ({"layers": 1, "pipeline": 2}, "1 layers cannot fill 2 pipeline stages"),
        ({"microbatches": 2}, "2 microbatches need a pipeline"),
        ({"pipeline": 2, "microbatches": 3}, "microbatches (3) must divide batch_size (8)"),
        ({"steps": 0}, "steps must be positive"),
    ],
)
def test_capture_config_rejects(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        CaptureConfig(**changes)
    assert message in str(caught.value)


def test_capture_config_resolves_ranks_and_sizes() -> None:
    injections = (Injection("host_pause", 4), Injection("slow_compute", 5, (2,), 3))
    config = CaptureConfig(ranks=3, injections=injections)
    assert config.recorded_steps == range(2, 10)
    assert config.resolved_injections() == (
        Injection("host_pause", 4, (0, 1, 2), 150.0),
        Injection("slow_compute", 5, (2,), 3.0),
    )
