"""Child process of ``bench_scale.py``: one job read with one executor, then analysed, in a fresh process.

Usage::

    python _scale_worker.py TRACE_DIR EXECUTOR WORKERS RESULT_JSON

Writes one JSON object: times (read, analyse), this process's peak RSS (the driver), each task's
peak RSS where it ran (a Ray worker, or a local parse process), the sizes the driver held, and a
digest of the analysis that must be the same for every executor.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import orjson


def _nbytes(obj: object) -> int:
    """Bytes of the numpy columns of a dataclass tree."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    fields = getattr(obj, "__dataclass_fields__", None)
    return sum(_nbytes(getattr(obj, f)) for f in fields) if fields else 0


def main(argv: list[str]) -> int:
    from bottleneck_oracle.dag.analysis import analyze
    from bottleneck_oracle.dag.report import analysis_to_dict
    from bottleneck_oracle.executor import make_executor
    from bottleneck_oracle.traces import read_trace

    trace_dir, kind, workers, out = Path(argv[1]), argv[2], int(argv[3]), Path(argv[4])
    executor = make_executor(kind, workers=workers)
    start = time.perf_counter()
    executor.map(len, ["start"])  # a Ray starts here: timed apart from the reading
    t0 = time.perf_counter()
    trace = read_trace(trace_dir, executor=executor)
    t1 = time.perf_counter()
    read_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    a = analyze(trace)
    t2 = time.perf_counter()
    report = orjson.dumps(analysis_to_dict(a), option=orjson.OPT_SERIALIZE_NUMPY)
    g = a.graph
    members = g.collective >= 0
    out.write_text(json.dumps({
        "executor": kind, "workers": workers, "ranks": len(trace.ranks), "events": len(trace.events),
        "start_s": t0 - start, "read_s": t1 - t0, "analyze_s": t2 - t1,
        "driver_peak_after_read": read_peak,
        "driver_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "task_peaks": executor.stats.peak_rss_bytes, "trace_bytes": _nbytes(trace),
        "graph_bytes": _nbytes(g), "points_bytes": _nbytes(a.points),
        # what a per-rank summary would carry (docs/scale.md): collective members, steps, path segments
        "collective_members": int(members.sum()), "steps": len(a.steps),
        "path_segments": int(sum(len(r.path_node) for r in a.steps)),
        "digest": hashlib.blake2b(report, digest_size=12).hexdigest(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
