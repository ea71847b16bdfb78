"""The ``manifest.json`` written beside generated traces: where it is and how a bad one is reported.

Captures and synthetic jobs hold different records; both are read through `read_manifest`, so a
missing or malformed manifest fails the same way, with one line naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bottleneck_oracle.errors import ConfigError, TraceFormatError

__all__ = ["MANIFEST_NAME", "read_manifest"]

MANIFEST_NAME = "manifest.json"
T = TypeVar("T")


def read_manifest(path: Path, parse: Callable[[Any], T], kind: str) -> T:
    """Parse the manifest at ``path`` (or in the folder ``path``) with ``parse``.

    Raises:
        TraceFormatError: the file is missing, not JSON, or not a ``kind`` manifest.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    try:
        return parse(json.loads(path.read_text()))
    except OSError as error:
        raise TraceFormatError(f"{path}: cannot read the manifest ({error.strerror})") from error
    except (ValueError, KeyError, TypeError, AttributeError, ConfigError) as error:
        raise TraceFormatError(f"{path}: not a {kind} manifest ({type(error).__name__}: {error})") from error
