"""Child process of ``bench_scale.py``: one job analysed (read whole, then ``analyze``) or scanned (``scan``: one
rank at a time) with one executor, in a fresh process.

Usage::

    python _scale_worker.py TRACE_DIR MODE EXECUTOR WORKERS RESULT_JSON    # MODE: analyze, scan, lean, replay, lean-replay, model, lean-model, lean-model-all

Writes one JSON object: times, this process's peak RSS (the driver), each task's peak RSS where it ran (a Ray
worker, or a local process), the sizes the driver held, a digest of the analysis (the same for every executor)
and a digest of what a scan reports (steps, walls, breakdowns and critical paths through the ranks, slow steps,
arrivals, stragglers, every finding with the causes, GPU-bound steps, GPU timeline, clocks), the same for both
modes; ``lean`` scans without critical paths (``--no-paths``) and its digest leaves out the breakdowns, paths and
findings (``lean_digest``). ``replay`` analyses the job whole and replays ``EDIT`` over its graph (``oracle whatif``'s
replay); ``lean-replay`` scans it without paths and replays ``EDIT`` rank by rank (``oracle scan --no-paths
--whatif``): the digest of every step's wall time on every rank under it (``replay_digest``) must be the same.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import orjson

from bottleneck_oracle.analysis.report import finding_to_dict

EDIT = "scale op=allreduce x2"
MAX_NODES = 200_000  # as step_graphs cuts a step for Predictor.predict: lean-model must equal model


def _nbytes(obj: object) -> int:
    """Bytes of the numpy columns of a dataclass tree."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    fields = getattr(obj, "__dataclass_fields__", None)
    return sum(_nbytes(getattr(obj, f)) for f in fields) if fields else 0


def _peak_rss() -> int:
    """This process's own peak RSS (``VmHWM``). Not ``ru_maxrss``: Linux carries it over ``exec`` from the forked
    parent, so a child of a large parent reads at least the parent's size."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def _digest(data: object) -> str:
    return hashlib.blake2b(pickle.dumps(data), digest_size=12).hexdigest()


def _path(r) -> tuple:  # type: ignore[no-untyped-def]
    """A step's breakdown and critical path, segment by segment (as bytes: as Python ints, the paths of a
    1,024-rank job would take hundreds of MB of the driver's peak that the digest is meant to measure)."""
    return (sorted(r.breakdown_ns.items()), *(np.ascontiguousarray(a, dtype=np.int64).tobytes() for a in (
        r.path_node, r.path_category, r.path_rank, r.path_start_ns, r.path_dur_ns)))


def _scan_view(steps, slow, arrivals, stragglers, gpu: dict, gpu_trace, clocks, findings, gpu_bound,  # type: ignore[no-untyped-def]
               paths: bool = True) -> str:
    """What a scan reports, the same from an analysis and from a scan (``paths``: with every step's breakdown
    and critical path, every finding with the causes, the GPU-bound steps)."""
    return _digest((
        [(r.step, r.rank, r.start_ns, r.end_ns) + (_path(r) if paths else ()) for r in steps],
        json.dumps([finding_to_dict(f) for f in findings] + [b.to_dict() for b in gpu_bound] if paths else [],
                   default=float),
        [(s.step, s.rank, s.wall_ns, s.median_ns) for s in slow],
        [(c.instance, c.step, c.last_rank, c.lateness_ns, c.relayed_ns) for c in arrivals],
        sorted(((f.step, f.ranks, f.impact_ms) for f in stragglers), key=str), sorted(gpu.items()),
        [gpu_trace.record(i) for i in range(len(gpu_trace))], None if clocks is None else clocks.offset_ns.tolist(),
    ))


def _analyze(trace_dir: Path, executor) -> dict:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.analysis.analysis import analyze
    from bottleneck_oracle.analysis.report import analysis_to_dict
    from bottleneck_oracle.findings.detectors import stragglers
    from bottleneck_oracle.findings.findings import strongest
    from bottleneck_oracle.findings.gpu_bound import gpu_bound_steps
    from bottleneck_oracle.findings.severity import bound_findings
    from bottleneck_oracle.graph.collectives import collective_arrivals
    from bottleneck_oracle.traces import read_trace

    t0 = time.perf_counter()
    trace = read_trace(trace_dir, executor=executor)
    t1 = time.perf_counter()
    read_peak = _peak_rss()
    a = analyze(trace)
    t2 = time.perf_counter()
    report = orjson.dumps(analysis_to_dict(a), option=orjson.OPT_SERIALIZE_NUMPY)
    g = a.graph
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps]
    best = strongest(bound_findings(stragglers(g, complete, {s.step for s in a.slow_steps}), complete))
    gpu = {key: tuple(a.gpu.record(i).values()) for key, i in g.steps.row_of().items()}
    bound = gpu_bound_steps(g, a.gpu, [(r.step, r.rank) for r in complete])
    view = (a.steps, a.slow_steps, collective_arrivals(g), best, gpu, a.gpu_trace, a.clocks, a.findings, bound)
    return {
        "ranks": len(trace.ranks), "events": len(trace.events), "read_s": t1 - t0, "work_s": t2 - t1,
        "driver_peak_after_read": read_peak, "trace_bytes": _nbytes(trace), "graph_bytes": _nbytes(g) + _nbytes(a.points),
        "digest": hashlib.blake2b(report, digest_size=12).hexdigest(),
        "scan_digest": _scan_view(*view), "lean_digest": _scan_view(*view, paths=False),
    }


def _replay(trace_dir: Path, executor) -> dict:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.analysis.analysis import analyze
    from bottleneck_oracle.graph.longest_path import longest_path
    from bottleneck_oracle.replay.compile import compile_edits
    from bottleneck_oracle.replay.engine import weights_with
    from bottleneck_oracle.traces import read_trace
    from bottleneck_oracle.truth.edits import parse_edit

    t0 = time.perf_counter()
    trace = read_trace(trace_dir, executor=executor)
    t1 = time.perf_counter()
    a = analyze(trace)
    c = compile_edits(a, [parse_edit(EDIT)], a.steps[0].step)
    t, _ = longest_path(a.points.index, weights_with(a.points, c.speedup, c.edge_scale, c.cut))
    walls = {(r.step, r.rank): int(t[r.window_points(t)[1]] - t[r.window_points(t)[0]]) for r in a.steps}
    return {"ranks": len(trace.ranks), "events": len(trace.events), "read_s": t1 - t0,
            "work_s": time.perf_counter() - t1, "replay_digest": _digest(sorted(walls.items()))}


def _model_view(steps: list[tuple[int, object, float]]) -> tuple[str, list[float]]:
    """A digest of every step's walk (step, node ids, predicted ms), and every step's predicted ms."""
    return _digest([(step, nodes.tolist()) for step, nodes, _ in steps]), [ms for _, _, ms in steps]  # type: ignore[attr-defined]


def _whole_model(trace_dir: Path, executor) -> dict:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.analysis.analysis import analyze
    from bottleneck_oracle.gnn.predict import Predictor
    from bottleneck_oracle.traces import read_trace

    t0 = time.perf_counter()
    trace = read_trace(trace_dir, executor=executor)
    t1 = time.perf_counter()
    a = analyze(trace)
    digest, ms = _model_view([(p.step, p.node[p.on_path >= 0.5], p.step_ms) for p in Predictor().predict(a)])
    return {"ranks": len(trace.ranks), "events": len(trace.events), "read_s": t1 - t0,
            "work_s": time.perf_counter() - t1, "model_digest": digest, "model_ms": ms}


def _scan_model(trace_dir: Path, executor, max_nodes: int | None) -> dict:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.gnn.scan_model import model_rounds
    from bottleneck_oracle.job.scan import scan

    t0 = time.perf_counter()
    s = scan([trace_dir], executor, critical_paths=False, then=model_rounds(max_nodes=max_nodes))
    digest, ms = _model_view([(m.step, m.node, m.step_ms) for m in s.then.steps])  # type: ignore[attr-defined]
    return {"ranks": len(s.ranks), "events": s.events, "read_s": 0.0, "work_s": time.perf_counter() - t0,
            "summary_bytes": list(s.summary_bytes), "task_peaks": list(s.task_peak_bytes),
            "map_s": s.seconds["map"], "reduce_s": s.seconds["reduce"], "then_s": s.seconds["then"],
            **({"model_digest": digest, "model_ms": ms} if max_nodes else {"all_model_ms": ms})}


def _scan(trace_dir: Path, executor, paths: bool = True, replay: bool = False) -> dict:  # type: ignore[no-untyped-def]
    from bottleneck_oracle.job.scan import scan
    from bottleneck_oracle.truth.edits import parse_edit

    t0 = time.perf_counter()
    s = scan([trace_dir], executor, critical_paths=paths, edits=[parse_edit(EDIT)] if replay else ())
    t1 = time.perf_counter()
    if replay:
        assert s.whatif is not None
        return {"ranks": len(s.ranks), "events": s.events, "read_s": 0.0, "work_s": t1 - t0,
                "summary_bytes": list(s.summary_bytes), "task_peaks": list(s.task_peak_bytes),
                "replay_digest": _digest(sorted(s.whatif.after_ns.items())), "map_s": s.seconds["map"],
                "reduce_s": s.seconds["reduce"]}
    gpu = {key: tuple(s.gpu.record(i).values()) for i, key in enumerate(s.gpu_steps)}
    return {
        "ranks": len(s.ranks), "events": s.events, "read_s": 0.0, "work_s": t1 - t0,
        "summary_bytes": list(s.summary_bytes), "task_peaks": list(s.task_peak_bytes),
        "scan_digest" if paths else "lean_digest":
            _scan_view(s.steps, s.slow_steps, s.arrivals, s.stragglers, gpu, s.gpu_trace, s.clocks, s.findings, s.gpu_bound,
                       paths),
        "map_s": s.seconds["map"], "reduce_s": s.seconds["reduce"],
    }


def main(argv: list[str]) -> int:
    from bottleneck_oracle.executor import make_executor

    trace_dir, mode, kind, workers, out = Path(argv[1]), argv[2], argv[3], int(argv[4]), Path(argv[5])
    executor = make_executor(kind, workers=workers)
    start = time.perf_counter()
    executor.map(len, ["start"])  # a Ray starts here: timed apart from the work
    t0 = time.perf_counter()
    if mode == "analyze":
        row = _analyze(trace_dir, executor)
    elif mode == "replay":
        row = _replay(trace_dir, executor)
    elif mode == "model":
        row = _whole_model(trace_dir, executor)
    elif mode in ("lean-model", "lean-model-all"):
        row = _scan_model(trace_dir, executor, MAX_NODES if mode == "lean-model" else None)
    else:
        row = _scan(trace_dir, executor, paths=mode == "scan", replay=mode == "lean-replay")
    out.write_text(json.dumps({
        "mode": mode, "executor": kind, "workers": workers, "start_s": t0 - start, **row,
        "driver_peak": _peak_rss(),
        "task_peaks": row.get("task_peaks") or executor.stats.peak_rss_bytes,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
