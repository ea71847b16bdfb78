"""Reading a capture's Kineto JSON as the profiler wrote it, for tests that check where an injection landed
without the project's reader: a step's window, its events by name, the longest gap on its thread."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

Trace = dict[str, Any]


def read_json(path: Path) -> Trace:
    """A gzipped Kineto trace as a dict."""
    with gzip.open(path, "rt") as file:
        trace: Trace = json.load(file)
    return trace


def step_window(trace: Trace, step: int) -> tuple[float, float, int]:
    """(start us, end us, thread id) of `ProfilerStep#step`."""
    (event,) = [e for e in trace["traceEvents"] if e.get("name") == f"ProfilerStep#{step}"]
    return event["ts"], event["ts"] + event["dur"], event["tid"]


def events_in_step(trace: Trace, step: int, name: str) -> list[dict[str, Any]]:
    """The complete events called ``name`` that start inside ``ProfilerStep#step``."""
    start, end, _ = step_window(trace, step)
    events = trace["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e["name"] == name and start <= e["ts"] < end]


def longest_gap_ms(trace: Trace, step: int) -> float:
    """Longest stretch of the step's own thread covered by no event inside the step."""
    start, end, tid = step_window(trace, step)
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and e["tid"] == tid and start < e["ts"] < end
    )
    longest, covered = 0.0, start
    for span_start, span_end in spans:
        longest = max(longest, span_start - covered)
        covered = max(covered, span_end)
    return max(longest, end - covered) / 1e3
