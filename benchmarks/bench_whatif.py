"""What-if speed on the 8-rank DLRM job (1M-event scale is bench_analyze's): one prediction by
replay alone and with the graph model, against the analysis of the same trace (the peer: what a
user already waits for once), and the whole `oracle whatif` process on a trace the workspace has
cached against `oracle analyze` on the same files.

Usage: ``python benchmarks/bench_whatif.py`` from the repository root (``make bench``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bottleneck_oracle.analysis.analysis import analyze  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402
from bottleneck_oracle.truth.edits import parse_edit  # noqa: E402
from bottleneck_oracle.whatif.predict import check_step, predict_whatif  # noqa: E402
from bottleneck_oracle.workspace.whatif import graph_model  # noqa: E402

DLRM = Path(__file__).resolve().parents[2] / "shared" / "traces" / "real" / "param" / "dlrm_8rank_kineto"
LARGE = Path(__file__).resolve().parent / ".work" / "dlrm_8rank_1m"  # made by make_large_trace.py (bench_analyze)
EDIT = "scale op=allreduce x2"


def _seconds(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def _process(*args: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bottleneck_oracle", *args], capture_output=True, env=env)
    if out.returncode:
        raise SystemExit(out.stderr.decode())
    return time.perf_counter() - started


def main() -> int:
    if not DLRM.is_dir():
        print(f"{DLRM}: not found (the real traces live in ../shared)")
        return 1
    trace = read_trace(DLRM)
    a = analyze(trace)
    step = check_step(a, None)
    edit = [parse_edit(EDIT)]
    model = graph_model()
    analyse_s = _seconds(lambda: analyze(trace))
    replay_s = _seconds(lambda: predict_whatif(a, step, edit))
    gnn_s = _seconds(lambda: predict_whatif(a, step, edit, model))
    print(f"DLRM 8 ranks, {len(trace.events):,} events, step {step}, `{EDIT}`:")
    print(f"  analysis (peer)       {analyse_s * 1e3:8.1f} ms")
    print(f"  what-if, replay       {replay_s * 1e3:8.1f} ms  ({replay_s / analyse_s:.2f}x the analysis)")
    print(f"  what-if, replay + GNN {gnn_s * 1e3:8.1f} ms  ({gnn_s / analyse_s:.2f}x the analysis)")
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "ORACLE_HOME": home}
        _process("whatif", str(DLRM), "--edit", EDIT, "--json", "--no-model", env=env)  # caches the analysis
        analyze_p = float(np.median([_process("analyze", str(DLRM), "--json", env=env) for _ in range(3)]))
        whatif_p = float(np.median([_process("whatif", str(DLRM), "--edit", EDIT, "--json", "--no-model", env=env)
                                    for _ in range(3)]))
        gnn_p = float(np.median([_process("whatif", str(DLRM), "--edit", EDIT, "--json", env=env) for _ in range(3)]))
    print("  whole process, trace cached in the workspace:")
    print(f"    oracle analyze --json (peer)  {analyze_p:6.2f} s")
    print(f"    oracle whatif --no-model      {whatif_p:6.2f} s  ({whatif_p / analyze_p:.2f}x)")
    print(f"    oracle whatif (with the GNN)  {gnn_p:6.2f} s  ({gnn_p / analyze_p:.2f}x)")
    if LARGE.is_dir():  # the same job at 1M events: where the workspace's cache pays
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "ORACLE_HOME": home}
            args = ("whatif", str(LARGE), "--edit", EDIT, "--json", "--no-model")
            first = _process(*args, env=env)
            cached = float(np.median([_process(*args, env=env) for _ in range(3)]))
            analyze_p = _process("analyze", str(LARGE), "--json", env=env)
        print("  the 1M-event DLRM job, whole process:")
        print(f"    oracle analyze --json (peer)         {analyze_p:6.2f} s")
        print(f"    oracle whatif, first (reads, caches)  {first:6.2f} s  ({first / analyze_p:.2f}x)")
        print(f"    oracle whatif, cached                 {cached:6.2f} s  ({cached / analyze_p:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
