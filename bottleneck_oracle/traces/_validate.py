"""What makes one trace event unusable: checks on a chunk's columns, counted by reason.

A malformed or out-of-range field costs its event, not the file. The checks
run on numpy columns, so a clean chunk pays a few array comparisons and no
Python work per event; only a column that numpy cannot convert at once (a
string, an integer beyond int64) is converted value by value.

Reasons are short and stable: ``bad <field>`` (the field's JSON name: ``bad
External id``, ``bad ts``) for a value of the wrong type (found by the decoder,
``_decode``) or an id that is not an int64; ``<field> out of range`` for a
number msgspec cannot hold; ``no ts``,
``no dur``, ``no cat`` (a complete event without it); ``ts out of range`` (the
absolute time is outside [-2**60, 2**62) ns), ``negative dur``, ``dur out of
range`` (2**60 ns or more), ``bad dur`` (a window mark's); ``not an object``
(an item of ``traceEvents`` that is no JSON object). Execution-trace nodes
count as ``node: <reason>`` (``node: duplicate id``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces._decode import DecodedFile

__all__ = [
    "DUR_MAX_NS", "MAX_RANKS", "START_MAX_NS", "START_MIN_NS", "Checks", "check_header", "float_column",
    "int_column", "summary", "tally", "time_checks", "time_ok", "to_int", "to_int_or_none", "to_uint",
    "uint_column",
]

_INT64 = (-(2**63), 2**63 - 1)
# absolute starts within [-2**60, 2**62) ns (up to year 2116) and durations below 2**60 ns
# (36 years): any start - origin + duration the analysis forms stays inside int64
START_MIN_NS, START_MAX_NS = -(2**60), 2**62
DUR_MAX_NS = 2**60
MAX_RANKS = 1 << 20

Checks = list[tuple[str, np.ndarray | None]]  # (reason, bool mask of the events it rejects)


def _as_int(value: object) -> int | None:
    """An int from a JSON int, integral float or (hex) string, unbounded; ``None`` if not one."""
    if type(value) is int:
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        try:
            return int(float(text))
        except (ValueError, OverflowError):
            return None


def to_int_or_none(value: object) -> int | None:
    """``_as_int`` within int64, else ``None``."""
    v = _as_int(value)
    return v if v is not None and _INT64[0] <= v <= _INT64[1] else None


def to_int(value: object) -> int:
    """``to_int_or_none``, with -1 (none) for anything that is not an int64."""
    v = to_int_or_none(value)
    return -1 if v is None else v


def to_uint(value: object) -> int | None:
    """A uint64 (``Comms Id``, which exceeds int64): negatives are "none" (0); ``None`` if not one."""
    v = _as_int(value)
    return None if v is None or v >= 2**64 else max(v, 0)


def int_column(values: list[object]) -> tuple[np.ndarray, np.ndarray | None]:
    """int64 column of JSON ids, and the mask of values that are no int64 (``None`` when all are)."""
    try:
        return np.array(values, dtype=np.int64), None
    except (TypeError, ValueError, OverflowError):
        pass  # a hex string, text, or an integer beyond int64: value by value
    parsed = [to_int_or_none(v) for v in values]
    bad = np.fromiter((v is None for v in parsed), dtype=bool, count=len(parsed))
    return np.array([-1 if v is None else v for v in parsed], dtype=np.int64), bad if bad.any() else None


def uint_column(values: list[object]) -> tuple[np.ndarray, np.ndarray | None]:
    """uint64 column of ``Comms Id`` (0 = none; real ids exceed int64) and the mask of bad values."""
    try:
        return np.maximum(np.array(values, dtype=np.int64), 0).astype(np.uint64), None
    except (TypeError, ValueError, OverflowError):
        ids = [to_uint(v) for v in values]
    bad = np.fromiter((v is None for v in ids), dtype=bool, count=len(ids))
    return np.array([v or 0 for v in ids], dtype=np.uint64), bad


def float_column(values: list[object]) -> np.ndarray:
    """float64 column of JSON numbers: ``None`` becomes nan, an integer beyond float64 inf."""
    try:
        return np.array(values, dtype=np.float64)
    except OverflowError:
        return np.array([v if v is None or abs(v) < 1e308 else math.inf for v in values],  # type: ignore[operator]
                        dtype=np.float64)


def time_checks(ts: np.ndarray, dur: np.ndarray, base_ns: int) -> Checks:
    """Checks of complete events' ``ts`` and ``dur`` (µs, nan where absent)."""
    with np.errstate(invalid="ignore", over="ignore"):
        start = ts * 1000.0 + base_ns
        has_ts, has_dur = ~np.isnan(ts), ~np.isnan(dur)
        return [
            ("no ts", ~has_ts),
            ("ts out of range", has_ts & ~((start >= START_MIN_NS) & (start < START_MAX_NS))),
            ("no dur", ~has_dur),
            ("negative dur", dur < 0),
            ("dur out of range", has_dur & ~(dur * 1000.0 < DUR_MAX_NS)),
        ]


def time_ok(ts: object, base_ns: int) -> bool:
    """Whether one side event's ``ts`` (µs) gives an absolute time in range."""
    if not isinstance(ts, (int, float)) or (isinstance(ts, float) and not math.isfinite(ts)):
        return False
    return START_MIN_NS <= ts * 1000 + base_ns < START_MAX_NS


def tally(checks: Checks, skipped: Counter[str]) -> np.ndarray | None:
    """Counts each rejected event once, under its first reason; returns the mask of events
    to keep, or ``None`` when every event passes."""
    dropped: np.ndarray | None = None
    for reason, mask in checks:
        if mask is None or not mask.any():
            continue
        fresh = mask if dropped is None else mask & ~dropped
        skipped[reason] += int(fresh.sum())
        dropped = fresh if dropped is None else dropped | fresh
    return None if dropped is None else ~dropped


def check_header(doc: DecodedFile, path: Path) -> None:
    """The file-level numbers every event depends on must be sane: refused, not guessed, if not.

    Raises:
        TraceFormatError: ``baseTimeNanoseconds``, ``distributedInfo.rank`` or ``world_size`` out of range.
    """
    base, dist = doc.baseTimeNanoseconds, doc.distributedInfo
    if base is not None and not 0 <= base < START_MAX_NS:
        raise TraceFormatError(f"{path.name}: baseTimeNanoseconds {base} is out of range")
    for key, value in (("rank", dist and dist.rank), ("world_size", dist and dist.world_size)):
        if value is not None and not 0 <= value < MAX_RANKS:
            raise TraceFormatError(f"{path.name}: distributedInfo.{key} {value} is out of range")


def summary(skipped: Iterable[tuple[str, int]]) -> str:
    """``negative dur: 2, bad ts: 1``, most frequent first."""
    return ", ".join(f"{reason}: {n}" for reason, n in sorted(skipped, key=lambda kv: (-kv[1], kv[0])))
