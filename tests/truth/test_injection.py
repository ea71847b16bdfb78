"""Injection syntax ``CATEGORY@STEP[:RANK,...][=SIZE]`` shared by captures and the generator."""

from __future__ import annotations

import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.injection import UNITS, Injection, parse_injection
from bottleneck_oracle.vocabulary import Bottleneck


def test_every_bottleneck_but_none_is_injectable() -> None:
    assert set(UNITS) == set(Bottleneck) - {Bottleneck.NONE}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("straggler_rank@5:1", Injection("straggler_rank", 5, (1,))),
        ("host_pause@3", Injection("host_pause", 3)),
        (" dataloader_stall@7:1,0=250 ", Injection("dataloader_stall", 7, (0, 1), 250.0)),
        ("slow_compute@6:0=3x", Injection("slow_compute", 6, (0,), 3.0)),
        ("exposed_communication@4=32MB", Injection("exposed_communication", 4, (), 32.0)),
        ("checkpoint_stall@2:1=0.5mb", Injection("checkpoint_stall", 2, (1,), 0.5)),
    ],
)
def test_parse_injection_accepts(text: str, expected: Injection) -> None:
    injection = parse_injection(text)
    assert injection == expected
    assert parse_injection(str(injection)) == injection


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("straggler_rank", "expected CATEGORY@STEP"),
        ("host_pause@x", "expected CATEGORY@STEP"),
        ("host_pause@3:", "expected CATEGORY@STEP"),
        ("gpu_melt@3", "unknown category 'gpu_melt'"),
        ("none@3", "unknown category 'none'"),
        ("host_pause@3:1=5MB", "host_pause sizes are in ms, not MB"),
        ("slow_compute@3=2.5", "integer >= 2"),
        ("host_pause@3:1,1", "a rank is listed twice"),
        ("host_pause@3=0", "size must be a positive number"),
    ],
)
def test_parse_injection_rejects(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_injection(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_parse_injection_restricted_to_supported() -> None:
    assert parse_injection("host_sync@3", supported=("host_sync",)) == Injection("host_sync", 3)
    with pytest.raises(ConfigError) as caught:
        parse_injection("host_pause@3", supported=("host_sync",))
    assert "use one of host_sync" in str(caught.value)
