"""Child process of ``bench_ingest_scale.py``: one job read, analysed and loaded into a FalkorDB of its own,
in a fresh process.

Usage::

    python _ingest_worker.py TRACE_DIR MODE HOME RESULT_JSON

MODE: ``analyze`` (no load: what the driver holds for the analysis alone), ``local`` (the ranks' parts
loaded one after the other in this process) or ``ray`` (each rank's part a task of a Ray with 2 CPUs,
on its own connection). Writes one JSON object: the load's time and counts, this process's peak RSS
before and after the load, each task's peak RSS, and the database server's peak RSS.
"""

from __future__ import annotations

import inspect
import json
import resource
import sys
import time
from pathlib import Path


def _server_peak(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def main(argv: list[str]) -> int:
    from bottleneck_oracle.analysis.analysis import analyze
    from bottleneck_oracle.config import Settings
    from bottleneck_oracle.executor import make_executor
    from bottleneck_oracle.graphdb import load_analysis, open_store, start_server, stop_server, trace_id
    from bottleneck_oracle.traces import read_trace

    trace_dir, mode, home, out = Path(argv[1]), argv[2], Path(argv[3]), Path(argv[4])
    trace = read_trace(trace_dir, workers=2)
    a = analyze(trace)
    analysed_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    row: dict = {"mode": mode, "ranks": len(trace.ranks), "events": len(trace.events), "nodes": len(a.graph),
                 "analysed_peak": analysed_peak}
    if mode != "analyze":
        info = start_server(home)
        settings = Settings(home=home, workers=2)
        extra = {}
        if mode == "ray":
            extra = {"executor": make_executor("ray", workers=2), "settings": settings}
            extra["executor"].map(len, ["start"])  # Ray starts here: timed apart from the load
        try:
            with open_store(settings) as store:
                store.apply_schema()
                if "executor" not in inspect.signature(load_analysis).parameters:
                    extra = {}  # an older revision, the peer: one process, the whole trace's tables at once
                t0 = time.perf_counter()
                report = load_analysis(store, a, trace_id=trace_id(trace), name=trace_dir.name, **extra)
                row |= {"load_s": time.perf_counter() - t0, "graph_nodes": report.nodes,
                        "graph_relationships": report.relationships, "nodes_created": report.nodes_created,
                        "server_peak": _server_peak(info.pid)}
                if "executor" in extra:
                    row["task_peaks"] = extra["executor"].stats.peak_rss_bytes
        finally:
            stop_server(home)
    row["driver_peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out.write_text(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
