"""Tests for capture/config.py: what a capture may inject, config checks with one-line messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.injection import Injection
from tests.conftest import run_oracle


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
        ({"layers": 4, "pipeline": 2, "stage_layers": (1, 1, 2)}, "has 3 entries for 2 pipeline stages"),
        ({"layers": 4, "pipeline": 2, "stage_layers": (4, 0)}, "every stage needs at least 1 layer"),
        ({"layers": 4, "pipeline": 2, "stage_layers": (1, 2)}, "sum to 3, not the 4 layers"),
        ({"layers": 4, "pipeline": 2, "stage_layers": (2.0, 2.0)}, "every stage needs at least 1 layer"),
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


def test_capture_config_takes_a_stage_split_that_fills_every_stage() -> None:
    config = CaptureConfig(ranks=4, layers=6, pipeline=4, microbatches=4, stage_layers=[1, 1, 1, 3])
    assert config.stage_layers == (1, 1, 1, 3)  # a list (as read back from a manifest) becomes a tuple
    assert CaptureConfig(ranks=4, layers=6, pipeline=4, microbatches=4).stage_layers == ()  # the even split


@pytest.mark.parametrize(("flag", "message"), [
    ("1,x", "give whole numbers separated by commas"),
    ("1,2", "sum to 3, not the 4 layers"),
    ("4", "has 1 entries for 2 pipeline stages"),
])
def test_capture_cli_refuses_a_bad_stage_split_before_training(tmp_path: Path, flag: str, message: str) -> None:
    result = run_oracle("capture", tmp_path / "job", "--ranks", "2", "--pipeline", "2", "--layers", "4",
                        "--stage-layers", flag)
    assert result.returncode == 2, result.stderr
    assert message in " ".join(result.stderr.split())
    assert not (tmp_path / "job").exists()
