"""The real trace folders beside the checkout, each read and analysed once per test process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL

REAL_FOLDERS = sorted(p for p in REAL.glob("*/*") if p.is_dir())


@cache
def real_case(folder: Path) -> Analysis | None:
    """The analysis of ``folder``, or None when the reader refuses it (an execution trace without
    its Kineto files, a sampled world)."""
    try:
        return analyze(read_trace(folder, workers=2))
    except TraceFormatError:
        return None
