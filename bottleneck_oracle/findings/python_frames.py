"""What a thread's Python frames did in a stretch of time with no torch op (``with_stack`` traces).

The frames are not graph nodes (they would nest the steps, ``graph/build.py``), so they are read from
the trace's events: each frame's own time in the stretch (its time less its callees'), summed by
function, says where a host pause went (``transformers/image_transforms.py(390): normalize``: 105
of 215 ms on TraceLens's Timesformer trace).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from bottleneck_oracle.graph._kernels import lane_nesting
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
    start, stop = np.maximum(ev.start_ns[rows], lo), np.minimum(end[rows], hi)
    order = np.lexsort((start - stop, start))  # lane_nesting's order: by start, the longer first
    rows, start, stop = rows[order], start[order], stop[order]
    parent, _, stop, *_ = lane_nesting(np.zeros(len(rows), np.int64), start, stop, 0)
    own = stop - start
    callee = parent >= 0
    np.add.at(own, parent[callee], -(stop - start)[callee])
    by_name = np.bincount(ev.name[rows], weights=own, minlength=len(trace.strings))
    out: Counter[str] = Counter()
    for name in np.flatnonzero(by_name).tolist():
        out[_function(trace.strings[name])] += int(by_name[name])
    return out
