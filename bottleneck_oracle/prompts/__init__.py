"""Prompt templates as files, loaded by name: ``load("system")`` reads ``system.md``,
``load_yaml("intents")`` parses ``intents.yaml``. The agent's system prompt, its tool-use rules, the
offline planner's example questions and the answer templates all live here, not in code.
Imports only the shared base modules.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from bottleneck_oracle.errors import ConfigError

__all__ = ["PROMPT_DIR", "load", "load_yaml"]

PROMPT_DIR = Path(__file__).resolve().parent


@functools.cache
def load(name: str) -> str:
    """The text of ``prompts/NAME.md``.

    Raises:
        ConfigError: no such prompt.
    """
    path = PROMPT_DIR / f"{name}.md"
    if not path.is_file():
        raise ConfigError(f"no prompt named {name!r} in {PROMPT_DIR}")
    return path.read_text().strip()


@functools.cache
def load_yaml(name: str) -> Any:
    """The parsed ``prompts/NAME.yaml``.

    Raises:
        ConfigError: no such file, or it is not YAML.
    """
    path = PROMPT_DIR / f"{name}.yaml"
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: {e}") from None
