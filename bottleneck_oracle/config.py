"""Settings built once at the edge (the CLI) from the environment and flags."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the tool keeps its state and how many processes it may use.

    Args:
        home (Path): workspace folder (``$ORACLE_HOME``, default ``./.oracle``).
        workers (int): processes used to parse rank files in parallel
            (``$ORACLE_WORKERS``, default: the number of CPUs).
    """

    home: Path
    workers: int

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Reads the settings from ``environ`` (default: ``os.environ``)."""
        env = os.environ if environ is None else environ
        workers = int(env.get("ORACLE_WORKERS", "0")) or (os.cpu_count() or 1)
        return cls(home=Path(env.get("ORACLE_HOME", ".oracle")), workers=max(1, workers))
