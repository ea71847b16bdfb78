"""Child process for our side of bench_analyze: read + full analysis of every step of every rank.

Usage::

    python _ours_worker.py RESULT_JSON TRACE_DIR WORKERS

Writes the phase times, the number of (step, rank) critical paths and of events.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    out, trace_dir, workers = Path(argv[1]), Path(argv[2]), int(argv[3])
    t0 = time.perf_counter()
    from bottleneck_oracle.dag.analysis import analyze
    from bottleneck_oracle.traces import read_trace

    t1 = time.perf_counter()
    trace = read_trace(trace_dir, workers=workers, partial=True)
    t2 = time.perf_counter()
    a = analyze(trace)
    t3 = time.perf_counter()
    out.write_text(json.dumps({
        "import_s": t1 - t0, "read_s": t2 - t1, "analyze_s": t3 - t2, "work_s": t3 - t1,
        "critical_paths": len(a.steps), "events": int(sum(r.events for r in trace.ranks)),
        "nodes": len(a.graph), "findings": len(a.findings),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
