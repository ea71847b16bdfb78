"""Child process for the HTA peer: load a trace folder, run HTA's critical path per step.

Runs under the HTA virtual environment's python (see `_hta_peer.py`), never ours:
it imports only the standard library and HTA. Usage::

    python _hta_worker.py TRACE_DIR RESULT_JSONL [--budget-s SECONDS]

Loads TRACE_DIR with `hta.trace_analysis.TraceAnalysis(trace_dir=...,
include_last_profiler_step=True)` (HTA drops the last step by default; a
one-step trace would have nothing left), finds every CPU `ProfilerStep#N`
annotation of every rank and calls `TraceAnalysis.critical_path_analysis(rank=r,
annotation="ProfilerStep", instance_id=i)` for each, where `i` is the position
of that step among the rows HTA itself selects for the annotation. A rank with
no ProfilerStep gets one whole-trace call (`annotation=""`, `instance_id=None`).
With `--budget-s`, no new call starts once that many seconds of critical path
work have been spent; the result says how many steps were left out.

HTA logs to stdout and stderr, so results go to RESULT_JSONL, one JSON object
a line, flushed as they come (a run killed at its time limit keeps the steps it
finished): `{"kind": "loaded", ...}` after loading, `{"kind": "step", ...}` per
critical path call (ranks interleaved step by step, so a budget cut still
samples every rank), `{"kind": "done", ...}` at the end.
"""

from __future__ import annotations

import json
import re
import sys
import time

T_START = time.perf_counter()

import hta  # noqa: E402  (timed import)
from hta.trace_analysis import TraceAnalysis  # noqa: E402

T_IMPORTED = time.perf_counter()

STEP_ANNOTATION = "ProfilerStep"
STEP_NAME_RE = re.compile(r"^ProfilerStep#(\d+)$")


def _error_text(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def find_step_instances(analyzer: TraceAnalysis, rank: int) -> list[tuple[int | None, int | None]]:
    """(step number, instance_id) for each CPU ProfilerStep of `rank`, in HTA's row order.

    Mirrors the selection in `CriticalPathAnalysis.critical_path_analysis`: every
    symbol containing the annotation, rows in trace order; the instance id is the
    position among those rows. GPU-side copies (`gpu_user_annotation`) are
    skipped but keep their positions. No step: one whole-trace entry `(None, None)`.
    """
    trace = analyzer.t
    df = trace.get_trace(rank)
    sym_ids = trace.symbol_table.get_sym_id_map()
    sym_names = trace.symbol_table.get_sym_table()
    annotation_ids = [v for k, v in sym_ids.items() if STEP_ANNOTATION in k]
    rows = df[df.name.isin(annotation_ids)]
    cpu_cat = sym_ids.get("user_annotation")
    found: list[tuple[int | None, int | None]] = []
    for pos, (name_id, cat_id) in enumerate(zip(rows.name.tolist(), rows.cat.tolist())):
        match = STEP_NAME_RE.match(sym_names[int(name_id)])
        if match and cat_id == cpu_cat:
            found.append((int(match.group(1)), pos))
    return found or [(None, None)]


def analyse_step(analyzer: TraceAnalysis, rank: int, step: int | None, instance: int | None) -> dict:
    """One `critical_path_analysis` call, reduced to a JSON-able record."""
    record: dict = {"rank": rank, "step": step, "instance_id": instance, "ok": False, "error": None}
    annotation = STEP_ANNOTATION if instance is not None else ""
    t0 = time.perf_counter()
    try:
        result = analyzer.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
        if result is None:
            record["error"] = "critical_path_analysis returned None (see the HTA log)"
        else:
            graph, ok = result
            record["ok"] = bool(ok)
            record["graph_nodes"] = graph.number_of_nodes()
            record["graph_edges"] = graph.number_of_edges()
            if ok:
                path = graph.critical_path_nodes
                record["cp_length_us"] = int(sum(e.weight for e in graph.critical_path_edges_set))
                record["cp_span_us"] = int(graph.node_list[path[-1]].ts - graph.node_list[path[0]].ts)
                record["cp_edges"] = len(graph.critical_path_edges_set)
            else:
                record["error"] = "critical_path() returned False (see the HTA log)"
            del graph, result
    except Exception as err:  # HTA fails by assert, ValueError, KeyError, ...: record and go on
        record["error"] = _error_text(err)
    record["seconds"] = round(time.perf_counter() - t0, 4)
    return record


def _write_line(fh, record: dict) -> None:
    fh.write(json.dumps(record) + "\n")
    fh.flush()


def _interleave(per_rank: dict[int, list[tuple[int | None, int | None]]]) -> list[tuple]:
    """(rank, step, instance) ordered step-major, so a budget cut still samples every rank."""
    longest = max((len(v) for v in per_rank.values()), default=0)
    return [
        (rank, *found[k]) for k in range(longest) for rank, found in per_rank.items() if k < len(found)
    ]


def main(argv: list[str]) -> int:
    trace_dir, out_path = argv[1], argv[2]
    budget_s = float(argv[argv.index("--budget-s") + 1]) if "--budget-s" in argv else None
    with open(out_path, "w") as out:
        t0 = time.perf_counter()
        analyzer = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
        t1 = time.perf_counter()
        ranks = sorted(analyzer.t.traces)
        todo = _interleave({r: find_step_instances(analyzer, r) for r in ranks})
        _write_line(out, {
            "kind": "loaded",
            "hta_version": getattr(hta, "__version__", "?"),
            "python": sys.version.split()[0],
            "ranks": ranks,
            "events_per_rank": {str(r): int(len(analyzer.t.get_trace(r))) for r in ranks},
            "import_s": round(T_IMPORTED - T_START, 4),
            "load_s": round(t1 - t0, 4),
            "steps_found": len(todo),
        })
        t2 = time.perf_counter()
        done = 0
        for rank, step, instance in todo:
            if budget_s is not None and time.perf_counter() - t2 > budget_s:
                break
            _write_line(out, {"kind": "step", **analyse_step(analyzer, rank, step, instance)})
            done += 1
        t3 = time.perf_counter()
        _write_line(out, {
            "kind": "done",
            "steps_done": done,
            "find_steps_s": round(t2 - t1, 4),
            "cp_s": round(t3 - t2, 4),
            "worker_s": round(t3 - T_START, 4),
        })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
