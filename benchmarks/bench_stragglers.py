"""Benchmark: ``oracle stragglers`` as a whole process, against the published artifact's analysis on the same
job in the same run, and on a synthetic 4,096-worker job (its peak memory too).

- AR (64 workers, 44 steps, the study's slow-worker job): ``oracle stragglers AR --json`` against
  ``analyzer/wia.py`` of ByteDance-Seed/StragglerAnalysis (S and its attribution; M_W and M_S are two more
  scripts there, in the same process here). The artifact needs a checkout and a Python with pandas<3:
  ``--artifact DIR --artifact-python PY``; without them only our side is timed.
- A synthetic job of DP 64 x PP 8 x TP 8 = 4,096 workers (512 recorded), 16 micro-batches, 20 steps, one
  slow worker (``synth/straggler_jobs.py``): wall time and peak RSS of the whole process, local, and with
  ``--ray`` also as Ray tasks on this machine.

Prints the medians of ``--runs`` timings and the ratio. Usage from the repository root:
``python benchmarks/bench_stragglers.py [--runs 3] [--artifact /path/StragglerAnalysis --artifact-python PY]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STRAGGLERS = Path(__file__).resolve().parents[2] / "shared" / "traces" / "stragglers"


def _timed(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of one process run to the end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, (peak if peak > before else before) * 1024  # the largest child so far, not this one's alone


def _oracle(*args: str) -> list[str]:
    return [sys.executable, "-m", "bottleneck_oracle", "stragglers", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--artifact", type=Path, help="a checkout of ByteDance-Seed/StragglerAnalysis")
    parser.add_argument("--artifact-python", default=sys.executable, help="a Python with pandas<3, pyarrow, pyyaml")
    parser.add_argument("--ray", action="store_true", help="also time the 4,096-worker job on Ray")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ORACLE_HOME": str(Path(tmp) / "home")}
        ours = [_timed(_oracle(str(STRAGGLERS / "AR"), "--json"), env)[0] for _ in range(args.runs)]
        line = f"AR: oracle stragglers {statistics.median(ours):.2f} s"
        if args.artifact:
            meta, trace = args.artifact / "data" / "meta-AR.yaml", args.artifact / "data" / "trace-AR.parquet"
            wia = [args.artifact_python, "analyzer/wia.py", "--metadata", str(meta), "--trace", str(trace),
                   "--dump-dir", str(Path(tmp) / "artifact")]
            artifact_env = {**os.environ, "PYTHONPATH": str(args.artifact)}
            theirs = [_timed(wia, artifact_env, str(args.artifact))[0] for _ in range(args.runs)]
            line += (f", the artifact's wia.py {statistics.median(theirs):.2f} s: "
                     f"{statistics.median(theirs) / statistics.median(ours):.2f}x ours")
        print(line, flush=True)

        from bottleneck_oracle.synth.straggler_jobs import StragglerJobSpec, write_job

        big = Path(tmp) / "big"
        t0 = time.perf_counter()
        write_job(StragglerJobSpec(dp=64, pp=8, tp=8, microbatches=16, steps=20, seed=0,
                                   slow_workers=((17, 5, 1.6),)), big)
        print(f"4,096 workers (512 recorded, 20 steps): generated in {time.perf_counter() - t0:.1f} s", flush=True)
        runs = {"local": _oracle(str(big), "--json")}
        if args.ray:
            runs["ray"] = _oracle(str(big), "--json", "--executor", "ray")
        for name, cmd in runs.items():
            seconds, peak = _timed(cmd, env)
            print(f"  {name}: {seconds:.1f} s, peak RSS {peak / 2**30:.2f} GiB (goal: 60 s, 4 GiB)", flush=True)


if __name__ == "__main__":
    main()
