"""Hand-built Kineto traces whose critical path is known by construction (times in µs)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

PID = 100
TID = 1


def op(name: str, ts: float, dur: float, tid: int = TID, cat: str = "cpu_op", **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": dict(args)}


def step(n: int, ts: float, dur: float) -> dict:
    return op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def runtime(name: str, ts: float, dur: float, corr: int, tid: int = TID) -> dict:
    return op(name, ts, dur, tid=tid, cat="cuda_runtime", correlation=corr, **{"External id": corr})


def kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream, "device": 0}}


def sync(kind: str, ts: float, dur: float, corr: int, stream: int = -1, **args: object) -> dict:
    return {"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"cuda_sync_kind": kind, "correlation": corr, "stream": stream, "device": 0, **args}}


def write(path: Path, events: list[dict], rank: int | None = None, world: int | None = None,
          gz: bool = True) -> Path:
    doc: dict = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    raw = json.dumps(doc).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path
