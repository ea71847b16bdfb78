"""What a thread's Python frames did in a stretch of time with no torch op (``with_stack`` traces).

The frames are not graph nodes (they would nest the steps, ``dag/build.py``), so they are read from
the trace's events: each frame's own time in the stretch (its time less its callees'), summed by
function, says where a host pause went (``transformers/image_transforms.py(390): normalize``: 105
of 215 ms on TraceLens's Timesformer trace).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from bottleneck_oracle.traces import EventKind, Trace

__all__ = ["python_self_time"]

_ADDRESS = re.compile(r" (object )?at 0x[0-9a-fA-F]+")  # "<built-in method astype of ... at 0x7cbf...>"


def _function(name: str) -> str:
    """A frame's name without its object's address and with its file's path cut to the file."""
    name = _ADDRESS.sub("", name)
    path, sep, rest = name.partition(".py(")
    return path.rsplit("/", 1)[-1] + sep + rest if sep else name


def python_self_time(trace: Trace, lane: int, lo: int, hi: int) -> Counter[str]:
    """ns of own time in [``lo``, ``hi``) of every function whose frames ran on ``lane`` then, frames
    that hold the whole stretch left out (they only called the others)."""
    ev = trace.events
    end = ev.start_ns + ev.dur_ns
    rows = np.flatnonzero((ev.lane == lane) & (ev.kind == EventKind.PYTHON) & (ev.start_ns < hi) & (end > lo)
                          & ~((ev.start_ns <= lo) & (end >= hi)))
    rows = rows[np.lexsort((-end[rows], ev.start_ns[rows]))]  # callers before their callees
    start, stop = np.maximum(ev.start_ns[rows], lo).tolist(), np.minimum(end[rows], hi).tolist()
    own = [b - a for a, b in zip(start, stop)]
    stack: list[int] = []
    for j, (a, b) in enumerate(zip(start, stop)):
        while stack and stop[stack[-1]] <= a:
            stack.pop()
        if stack:
            own[stack[-1]] -= b - a
        stack.append(j)
    out: Counter[str] = Counter()
    for j, name in enumerate(ev.name[rows].tolist()):
        out[_function(trace.strings[name])] += own[j]
    return out
