"""Benchmark: ``oracle diff`` of two traces the workspace has cached, against one ``oracle analyze --json``
of the larger of them, each a whole process started fresh, in the same run.

The pairs: the real 8-rank DLRM job against itself, and HTA's df_index_resolver against itself, each
against a copy gzipped anew (other bytes, the same events: a trace of its own for the workspace). Prints the median of ``--runs``
timings of each and their ratio (the goal: a diff under 1.5x an analyze). Usage:
``python benchmarks/bench_diff.py [--runs 5]`` from the repository root.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces" / "real"
PAIRS = {"dlrm 8 ranks": REAL / "param" / "dlrm_8rank_kineto", "df_index_resolver": REAL / "hta" / "df_index_resolver"}


def _timed(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bottleneck_oracle", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    print(f"{'pair':<20} {'analyze s':>10} {'diff s':>8} {'diff/analyze':>13}")
    for name, folder in PAIRS.items():
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "copy"
            shutil.copytree(folder, copy)
            for f in copy.glob("*.gz"):
                f.write_bytes(gzip.compress(gzip.decompress(f.read_bytes()), compresslevel=1, mtime=0))
            env = {**os.environ, "ORACLE_HOME": str(Path(tmp) / "home")}
            diff = ["diff", str(folder), str(copy), "--format", "json", "--partial"]
            _timed(diff, env)  # resolves and caches both
            analyze = [_timed(["analyze", str(folder), "--json", "--partial"], env) for _ in range(runs)]
            compared = [_timed(diff, env) for _ in range(runs)]
        a, d = statistics.median(analyze), statistics.median(compared)
        print(f"{name:<20} {a:>10.2f} {d:>8.2f} {d / a:>12.2f}x")


if __name__ == "__main__":
    main()
