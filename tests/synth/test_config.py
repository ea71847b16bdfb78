"""Tests for synth/config.py: validation with one-line messages, injections, JSON round trip."""

from __future__ import annotations

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.model import MODELS, ModelSpec
from bottleneck_oracle.truth.injection import parse_injection


def test_config_defaults_and_derived_values() -> None:
    config = SynthConfig(model="7b", dp=8, tp=4, pp=2, first_step=5, steps=3)
    assert config.ranks == 64
    assert config.recorded_steps == range(5, 8)
    assert config.batch == MODELS["7b"].micro_batch and config.compute_efficiency == 0.5
    assert [config.stage_of(r) for r in (0, 31, 32, 63)] == [0, 0, 1, 1]
    assert config.virtual_stages == 1
    assert SynthConfig(pp=2, microbatches=4, interleave=True).virtual_stages == 2


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dp": 0}, "dp must be an integer >= 1"),
        ({"dp": 4097}, "4097 ranks; 1 to 4096"),
        ({"model": "70b"}, "unknown model '70b'"),
        ({"hardware": "TPU"}, "unknown hardware 'TPU'"),
        ({"tp": 3}, "tp=3 does not divide"),
        ({"pp": 3}, "do not split into 3 pipeline chunks"),
        ({"pp": 2, "microbatches": 3, "interleave": True}, "interleave needs"),
        ({"noise": 0.9}, "0 <= noise <= 0.5"),
        ({"efficiency": 1.5}, "efficiency must be in (0, 1]"),
        ({"injections": ("host_pause@9",)}, "step 9 is not recorded"),
        ({"injections": ("host_pause@2:4",)}, "rank 4 >= ranks (2)"),
        ({"injections": ("pipeline_bubble@2",), "dp": 2, "pp": 1}, "needs pp > 1"),
        ({"injections": ("exposed_communication@2:0",)}, "drop the rank list"),
        ({"injections": ("host_pause@2:0", "host_pause@2:0=5")}, "same step and rank"),
    ],
)
def test_config_rejects(changes: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"dp": 2, "steps": 4, **changes}
    with pytest.raises(ConfigError) as caught:
        SynthConfig(**settings)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_pipeline_bubble_refuses_the_last_stage() -> None:
    with pytest.raises(ConfigError) as caught:
        SynthConfig(pp=2, microbatches=2, injections=(parse_injection("pipeline_bubble@2:1"),))
    assert "last stage" in str(caught.value)


def test_resolved_injections_fill_ranks_and_sizes() -> None:
    config = SynthConfig(dp=2, pp=2, microbatches=2, injections=(
        parse_injection("straggler_rank@2:1=30"), parse_injection("exposed_communication@3"),
        parse_injection("pipeline_bubble@4")))
    straggler, exposed, bubble = config.resolved_injections()
    assert (straggler.ranks, straggler.size) == ((1,), 30.0)
    assert (exposed.ranks, exposed.size) == ((0, 1, 2, 3), 16.0)
    assert bubble.ranks == (0, 1)  # the first stage sends the activations


def test_config_json_round_trip_with_custom_model() -> None:
    spec = ModelSpec("mini", layers=2, d_model=64, heads=2, ffn=128, vocab=256, seq_len=32, micro_batch=2)
    config = SynthConfig(model=spec, hardware="A100", dp=2, injections=("host_sync@2:1=3",), seed=7)
    again = SynthConfig.from_json(config.to_json())
    assert again == config
    assert SynthConfig.from_json(SynthConfig().to_json()) == SynthConfig()
