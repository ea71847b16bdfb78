"""Build a large multi-rank Kineto trace by repeating the steps of a real one.

Each rank file of the source folder is split into its step block (events
inside the ProfilerStep annotations, plus the GPU work and flows whose launch
is inside), a head (metadata `M` events, the `Trace` span, instants and
anything before the first step) and a tail (anything after the last step, such
as the profiler's closing `cudaDeviceSynchronize`). The output repeats the
block K times, copy k shifted by k·P, where the period P is one for all ranks
(the longest rank's block plus a 40 µs step gap), so collectives stay aligned
across ranks exactly as in the source; ranks whose step is shorter than P get
an idle gap between their copies. Copy k renames `ProfilerStep#N` to
`ProfilerStep#{N + k·n}` (n = steps in the block), adds k·O to correlation
ids, `External id`s and flow ids (one offset, so equalities between them hold)
and k times the span of each of `Ev Idx`, `Sequence number`, `Python id`,
`Python parent id`. The head appears once, unchanged except that the `Trace`
span is widened to cover all copies; the tail appears once, after the last
copy (shifted and offset as copy K-1). Other top-level keys (`distributedInfo`,
`deviceProperties`, ...) are kept, written with `": "` separators as Kineto
does (HTA finds ranks with the regex `"rank":\\s+(\\d+)`).

Output files keep the source names, gzipped deterministically (no name, mtime
0); one event per line. A stamp file (`make_large_trace.stamp`, a name that
trace loaders skip) records the inputs; a second call with the same inputs
returns at once.

Usage::

    python benchmarks/make_large_trace.py [--src DIR] [--out DIR] [--min-events N]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import math
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_SRC = BENCH_DIR.parent.parent / "shared" / "traces" / "real" / "param" / "dlrm_8rank_kineto"
DEFAULT_OUT = BENCH_DIR / ".work" / "dlrm_8rank_1m"
DEFAULT_MIN_EVENTS = 1_000_000
GENERATOR_VERSION = 1
STAMP_NAME = "make_large_trace.stamp"
STEP_GAP_US = 40  # time inside prof.step() between two steps (30-60 µs in real traces)
GZIP_LEVEL = 6
STEP_NAME_RE = re.compile(r"^ProfilerStep#(\d+)$")
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
LAUNCH_FLOW_CATS = frozenset({"ac2g", "async_cpu_to_gpu"})
CORRELATION_ARGS = ("correlation", "External id", "wait_on_cuda_event_record_corr_id")
SPAN_OFFSET_ARGS = ("Ev Idx", "Sequence number", "Python id", "Python parent id")
TRACE_SUFFIXES = (".json", ".json.gz")

Event = dict[str, Any]


@dataclass(frozen=True, slots=True)
class _RankParts:
    """One source rank file split into the parts written once and the block repeated."""

    name: str  # output file name
    top: dict[str, Any]  # top-level keys other than traceEvents, in source order
    events_key_index: int  # position of traceEvents among the top-level keys
    head: list[Event]
    block: list[Event]
    tail: list[Event]
    block_start: float  # start of the first step
    block_span: float  # from block_start to the last end among block events
    n_steps: int  # step numbers the block covers (first to last)


@dataclass(frozen=True, slots=True)
class _Plan:
    """How the copies are made: count, period and id offsets shared by all ranks."""

    copies: int
    period_us: int
    correlation_offset: int
    span_offsets: dict[str, int]


def _read_events(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"{path}: not a Kineto trace object with a traceEvents list")
    return doc


def _step_bounds(path: Path, events: list[Event]) -> tuple[float, float, int]:
    steps = [
        (e["ts"], e["ts"] + e.get("dur", 0), int(m.group(1)))
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "user_annotation"
        and (m := STEP_NAME_RE.match(str(e.get("name", ""))))
    ]
    if not steps:
        raise ValueError(f"{path}: no ProfilerStep#N annotation to repeat")
    numbers = [n for _, _, n in steps]
    return min(s for s, _, _ in steps), max(e for _, e, _ in steps), max(numbers) - min(numbers) + 1


def _section_by_time(e: Event, start: float, end: float) -> str:
    if e.get("ph") == "M" or e.get("cat") == "Trace":
        return "head"
    ts = e.get("ts", start)
    return "block" if start <= ts <= end else ("head" if ts < start else "tail")


def _launch_key(e: Event) -> Any:
    """Correlation of a GPU event, launch call or launch flow; None for anything else."""
    if e.get("ph") in ("s", "f"):
        return e.get("id") if e.get("cat") in LAUNCH_FLOW_CATS else None
    args = e.get("args")
    return args.get("correlation") if isinstance(args, dict) else None


def _split_rank(path: Path) -> _RankParts:
    """Split one rank file; GPU events and launch flows follow the section of their launch call."""
    doc = _read_events(path)
    events = doc["traceEvents"]
    start, end, n_steps = _step_bounds(path, events)
    launch_section = {
        e["args"]["correlation"]: _section_by_time(e, start, end)
        for e in events
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})
    }
    parts: dict[str, list[Event]] = {"head": [], "block": [], "tail": []}
    for e in events:
        section = _section_by_time(e, start, end)
        if e.get("ph") != "M" and e.get("cat") != "Trace":
            section = launch_section.get(_launch_key(e), section)
        parts[section].append(e)
    block_end = max(e["ts"] + e.get("dur", 0) for e in parts["block"])
    keys = list(doc)
    return _RankParts(
        name=path.name, top={k: v for k, v in doc.items() if k != "traceEvents"},
        events_key_index=keys.index("traceEvents"), head=parts["head"], block=parts["block"],
        tail=parts["tail"], block_start=start, block_span=block_end - start, n_steps=n_steps,
    )


def _int_values(events: list[Event], key: str) -> list[int]:
    values = []
    for e in events:
        args = e.get("args")
        if isinstance(args, dict) and isinstance(args.get(key), int) and args[key] >= 0:
            values.append(args[key])
    return values


def _make_plan(ranks: list[_RankParts], min_events: int) -> _Plan:
    """Copies so that all ranks together hold at least `min_events`; offsets that keep ids unique."""
    per_copy = sum(len(r.block) for r in ranks)
    once = sum(len(r.head) + len(r.tail) for r in ranks)
    copies = max(1, math.ceil((min_events - once) / per_copy))
    period = math.ceil(max(r.block_span for r in ranks)) + STEP_GAP_US
    everything = [e for r in ranks for e in (*r.head, *r.block, *r.tail)]
    ids = [v for key in CORRELATION_ARGS for v in _int_values(everything, key)]
    ids += [e["id"] for e in everything if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int)]
    correlation_offset = 10 ** len(str(max(ids, default=0)))
    span_offsets = {}
    for key in SPAN_OFFSET_ARGS:
        values = _int_values(everything, key)
        if values:
            span_offsets[key] = max(values) - min(values) + 1
    return _Plan(copies, period, correlation_offset, span_offsets)


def _shifted(e: Event, k: int, plan: _Plan, parts: _RankParts) -> Event:
    """Event `e` as it appears in copy k."""
    out = dict(e)
    if "ts" in out:
        out["ts"] = e["ts"] + k * plan.period_us
    if k == 0:
        return out
    if out.get("ph") in ("s", "f") and isinstance(out.get("id"), int):
        out["id"] = out["id"] + k * plan.correlation_offset
    name = out.get("name")
    if isinstance(name, str) and (m := STEP_NAME_RE.match(name)):
        out["name"] = f"ProfilerStep#{int(m.group(1)) + k * parts.n_steps}"
    args = e.get("args")
    if isinstance(args, dict):
        new_args = dict(args)
        for key in CORRELATION_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                new_args[key] = args[key] + k * plan.correlation_offset
        for key, span in plan.span_offsets.items():
            if isinstance(args.get(key), int) and args[key] >= 0:
                new_args[key] = args[key] + k * span
        out["args"] = new_args
    return out


def _head_event(e: Event, plan: _Plan) -> Event:
    if e.get("cat") == "Trace" and "dur" in e:
        return {**e, "dur": e["dur"] + (plan.copies - 1) * plan.period_us}
    return e


def _dump(e: Event) -> str:
    return json.dumps(e, ensure_ascii=False)


def _write_rank(parts: _RankParts, plan: _Plan, out_path: Path) -> tuple[int, int]:
    """Write one output rank file; returns (events, uncompressed bytes)."""
    top_items = list(parts.top.items())
    before, after = top_items[: parts.events_key_index], top_items[parts.events_key_index:]
    count = raw = 0
    with open(out_path, "wb") as fh, gzip.GzipFile(
        filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=GZIP_LEVEL
    ) as gz:

        def emit(text: str) -> None:
            nonlocal raw
            data = text.encode()
            raw += len(data)
            gz.write(data)

        emit("{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in before) + '  "traceEvents": [\n')
        chunks = itertools.chain(
            [[_head_event(e, plan) for e in parts.head]],
            ([_shifted(e, k, plan, parts) for e in parts.block] for k in range(plan.copies)),
            [[_shifted(e, plan.copies - 1, plan, parts) for e in parts.tail]],
        )
        separator = ""
        for chunk in chunks:  # lazily: one copy in memory at a time
            if chunk:
                emit(separator + ",\n".join(_dump(e) for e in chunk))
                separator, count = ",\n", count + len(chunk)
        emit("\n  ]" + "".join(f",\n  {json.dumps(k)}: {json.dumps(v)}" for k, v in after) + "\n}\n")
    return count, raw


def _source_files(src_dir: Path) -> list[Path]:
    files = sorted(p for p in Path(src_dir).iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
    if not files:
        raise ValueError(f"{src_dir}: no .json or .json.gz trace file")
    return files


def _inputs_key(files: list[Path], min_events: int) -> dict[str, Any]:
    return {
        "generator_version": GENERATOR_VERSION,
        "min_events": min_events,
        "sources": [[p.name, hashlib.sha256(p.read_bytes()).hexdigest()] for p in files],
    }


def read_stamp(out_dir: Path) -> dict[str, Any] | None:
    """What `make_large_trace` recorded in `out_dir` (inputs, copies, events, bytes, seconds), or None."""
    stamp = Path(out_dir) / STAMP_NAME
    return json.loads(stamp.read_text()) if stamp.is_file() else None


def _is_current(out_dir: Path, inputs: dict[str, Any]) -> bool:
    stamp = read_stamp(out_dir)
    if stamp is None or stamp.get("inputs") != inputs:
        return False
    return all((out_dir / name).is_file() and (out_dir / name).stat().st_size == size for name, size in stamp["files"])


def make_large_trace(src_dir: Path, out_dir: Path, min_events: int = DEFAULT_MIN_EVENTS) -> Path:
    """Write a copy of the multi-rank trace in `src_dir` whose steps repeat until all ranks hold `min_events`.

    Skips the work when `out_dir` already holds the output of the same inputs
    (source file hashes, `min_events`, generator version). The folder is built
    beside `out_dir` and moved into place, so a killed run leaves no half folder.

    Returns:
        `out_dir`; `read_stamp(out_dir)` has the counts.

    Raises:
        ValueError: a source file is not a Kineto trace or has no ProfilerStep.
    """
    out_dir = Path(out_dir)
    files = _source_files(Path(src_dir))
    inputs = _inputs_key(files, min_events)
    if _is_current(out_dir, inputs):
        return out_dir
    t0 = time.perf_counter()
    ranks = [_split_rank(p) for p in files]
    plan = _make_plan(ranks, min_events)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    events = raw = 0
    for parts in ranks:
        n, size = _write_rank(parts, plan, tmp / parts.name)
        events, raw = events + n, raw + size
    written = sorted((p.name, p.stat().st_size) for p in tmp.iterdir())
    stamp = {
        "inputs": inputs, "files": written, "copies": plan.copies, "period_us": plan.period_us,
        "correlation_offset": plan.correlation_offset, "events": events, "raw_bytes": raw,
        "gz_bytes": sum(size for _, size in written), "seconds": round(time.perf_counter() - t0, 2),
    }
    (tmp / STAMP_NAME).write_text(json.dumps(stamp, indent=1))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> int:
    """Command line: build (or find) the large trace and print its size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC, help="folder of rank files to repeat")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--min-events", type=int, default=DEFAULT_MIN_EVENTS, help="events over all ranks")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    out_dir = make_large_trace(args.src, args.out, args.min_events)
    elapsed = time.perf_counter() - t0
    stamp = read_stamp(out_dir) or {}
    reused = elapsed < stamp.get("seconds", 0) / 2
    print(
        f"{out_dir}: {len(stamp['files'])} files, {stamp['events']:,} events, {stamp['copies']} copies "
        f"of the step every {stamp['period_us']} us; {stamp['gz_bytes'] / 2**20:.1f} MiB gzipped, "
        f"{stamp['raw_bytes'] / 2**20:.1f} MiB raw; "
        + (f"up to date (built in {stamp['seconds']} s)" if reused else f"built in {elapsed:.1f} s")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
