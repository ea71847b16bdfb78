"""Recipes that make a case's trace: ``{synth: {SynthConfig fields}}`` or ``{capture: {CaptureConfig fields}}``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bottleneck_oracle.capture import CaptureConfig, capture
from bottleneck_oracle.capture import parse_injection as parse_capture_injection
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.truth import parse_injection

__all__ = ["RECIPE_KINDS", "recipe_config", "run_recipe"]

RECIPE_KINDS = ("synth", "capture")


def recipe_config(recipe: dict[str, Any]) -> SynthConfig | CaptureConfig:
    """The job a recipe describes, validated.

    Raises:
        ConfigError: not one of ``synth``/``capture``, an unknown field, or a bad value.
    """
    if not isinstance(recipe, dict) or len(recipe) != 1 or next(iter(recipe)) not in RECIPE_KINDS:
        raise ConfigError(f"recipe must be {{synth: {{...}}}} or {{capture: {{...}}}}, got {recipe!r}")
    kind, fields = next(iter(recipe.items()))
    if not isinstance(fields, dict):
        raise ConfigError(f"recipe {kind}: expected a mapping of config fields, got {fields!r}")
    fields = dict(fields)
    parse = parse_injection if kind == "synth" else parse_capture_injection
    fields["injections"] = tuple(parse(str(i)) for i in fields.get("injections", ()))
    cls = SynthConfig if kind == "synth" else CaptureConfig
    try:
        return cls(**fields)
    except TypeError as e:
        raise ConfigError(f"recipe {kind}: {e}".replace("__init__() ", "")) from None


def run_recipe(recipe: dict[str, Any], out: Path, *, workers: int = 1) -> Path:
    """Makes the recipe's trace in ``out`` (a synthetic job, or a real capture: needs torch).

    Raises:
        ConfigError: a bad recipe.
        CaptureError: a rank of the capture failed.
    """
    config = recipe_config(recipe)
    if isinstance(config, SynthConfig):
        synthesize(out, config, workers=workers)
    else:
        capture(out, config)
    return out
