"""Injected faults: ``CATEGORY@STEP[:RANK,...][=SIZE]``, shared by real captures and the generator.

Categories are the bottleneck vocabulary; each has one unit for its size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["DEFAULT_SIZES", "UNITS", "Injection", "parse_injection"]

UNITS = {
    Bottleneck.HOST_PAUSE: "ms",
    Bottleneck.STRAGGLER_RANK: "ms",
    Bottleneck.DATALOADER_STALL: "ms",
    Bottleneck.SLOW_COMPUTE: "x",
    Bottleneck.EXPOSED_COMMUNICATION: "MB",
    Bottleneck.CHECKPOINT_STALL: "MB",
    Bottleneck.HOST_SYNC: "ms",
    Bottleneck.LAUNCH_OVERHEAD: "x",
    Bottleneck.PIPELINE_BUBBLE: "ms",
}
DEFAULT_SIZES = {
    Bottleneck.HOST_PAUSE: 150.0,
    Bottleneck.STRAGGLER_RANK: 150.0,
    Bottleneck.DATALOADER_STALL: 150.0,
    Bottleneck.SLOW_COMPUTE: 4.0,
    Bottleneck.EXPOSED_COMMUNICATION: 16.0,
    Bottleneck.CHECKPOINT_STALL: 8.0,
    Bottleneck.HOST_SYNC: 20.0,
    Bottleneck.LAUNCH_OVERHEAD: 4.0,
    Bottleneck.PIPELINE_BUBBLE: 50.0,
}
_NAMES = ", ".join(UNITS)
_SYNTAX = "CATEGORY@STEP[:RANK,RANK...][=SIZE], for example straggler_rank@5:1=100ms"
_INJECTION_RE = re.compile(
    r"(?P<category>[A-Za-z_]+)@(?P<step>\d+)(?::(?P<ranks>\d+(?:,\d+)*))?"
    r"(?:=(?P<size>\d+(?:\.\d*)?)(?P<unit>[A-Za-z]*))?"
)


@dataclass(frozen=True, slots=True)
class Injection:
    """One fault to inject: what, in which profiler step, on which ranks, how big.

    Attributes:
        category: a name of the bottleneck vocabulary (not `none`).
        step: the N of `ProfilerStep#N` it lands in (the wait and warmup steps count).
        ranks: ranks that apply it, ascending; empty means every rank.
        size: in `UNITS[category]`; None means `DEFAULT_SIZES[category]`.
    """

    category: str
    step: int
    ranks: tuple[int, ...] = ()
    size: float | None = None

    def __post_init__(self) -> None:
        if self.category not in UNITS:
            raise ConfigError(f"injection {self}: unknown category {self.category!r}; use one of {_NAMES}")
        if self.step < 0 or any(rank < 0 for rank in self.ranks):
            raise ConfigError(f"injection {self}: step and ranks must be >= 0")
        if len(set(self.ranks)) != len(self.ranks):
            raise ConfigError(f"injection {self}: a rank is listed twice")
        object.__setattr__(self, "ranks", tuple(sorted(self.ranks)))
        if self.size is None:
            return
        object.__setattr__(self, "size", float(self.size))
        if not (math.isfinite(self.size) and self.size > 0):
            raise ConfigError(f"injection {self}: size must be a positive number")
        if self.category == "slow_compute" and (self.size < 2 or self.size % 1):
            raise ConfigError(f"injection {self}: the slow_compute factor must be an integer >= 2")

    @property
    def unit(self) -> str:
        """The unit of `size`: `ms`, `x` or `MB`."""
        return UNITS.get(self.category, "")

    def __str__(self) -> str:
        text = f"{self.category}@{self.step}"
        if self.ranks:
            text += ":" + ",".join(str(rank) for rank in self.ranks)
        if self.size is not None:
            text += f"={self.size:.12g}{self.unit}"
        return text


def parse_injection(text: str, supported: tuple[str, ...] | None = None) -> Injection:
    """Parse `CATEGORY@STEP[:RANK,RANK...][=SIZE]`, for example `straggler_rank@5:1=100ms`.

    The size may carry its unit (`ms`, `x`, `MB`, any case); it must be the category's.

    Args:
        text: the injection as given on the command line.
        supported: the categories the caller can inject (default: all).

    Returns:
        The injection; its size is None when the text gives none.

    Raises:
        ConfigError: bad syntax, an unknown category, a wrong unit or an invalid value.
    """
    match = _INJECTION_RE.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"injection {text!r}: expected {_SYNTAX}")
    category = match["category"]
    allowed = supported or tuple(UNITS)
    if category not in allowed:
        names = ", ".join(allowed)
        raise ConfigError(f"injection {text!r}: unknown category {category!r}; use one of {names}")
    unit = match["unit"] or ""
    if unit and unit.lower() != UNITS[category].lower():
        raise ConfigError(f"injection {text!r}: {category} sizes are in {UNITS[category]}, not {unit}")
    ranks = tuple(int(rank) for rank in match["ranks"].split(",")) if match["ranks"] else ()
    size = float(match["size"]) if match["size"] else None
    return Injection(category, int(match["step"]), ranks, size)
