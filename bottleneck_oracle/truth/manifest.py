"""The ``manifest.json`` written beside generated traces: where it is and how a bad one is reported.

Captures and synthetic jobs hold different records; both are read through `read_manifest`, so a
missing or malformed manifest fails the same way, with one line naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bottleneck_oracle.errors import ConfigError, TraceFormatError

__all__ = ["MANIFEST_NAME", "TRACE_PATTERN", "GroundTruth", "read_manifest"]

MANIFEST_NAME = "manifest.json"
TRACE_PATTERN = "rank{rank}.pt.trace.json.gz"  # one file name for every rank trace, captured or simulated
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


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """One injected fault as it happened.

    Attributes:
        category, step, ranks: what was injected where (`ranks` explicit, never empty).
        size, unit: the requested size (`ms`, `x` or `MB`).
        injected_ms: the time the fault added on its ranks: the requested ms for sleeps,
            else measured: the all-reduce's and the save's wall time, and for `slow_compute`
            the forward+backward CPU time of the main thread above the rank's median step;
            averaged over the ranks; None if it could not be measured.
    """

    category: str
    step: int
    ranks: tuple[int, ...]
    size: float
    unit: str
    injected_ms: float | None
