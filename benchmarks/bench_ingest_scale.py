"""Benchmark: loading many ranks into the graph database, rank part by rank part, in one run.

A synthetic job (``bench_scale.py`` writes it) is read, analysed and loaded in full into a FalkorDB of
its own by ``_ingest_worker.py``, in a fresh process per mode: the analysis alone (the peer: what the
driver holds before any load), the ranks' parts one after the other in the driver (``local``), and
the parts as tasks of a Ray with 2 CPUs (``ray``). With ``--peer-src DIR`` (a checkout of an older
revision), its load runs too, in the same run. Reports the load's time, the driver's peak against the
analysis alone, each task's peak and the server's, and checks that every mode creates the same graph.
Usage: ``python benchmarks/bench_ingest_scale.py [--ranks 64,256] [--out DIR] [--peer-src DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import make_job  # noqa: E402

HERE = Path(__file__).resolve().parent
MB = 1024 * 1024


def measure(folder: Path, mode: str, out: Path, src: Path | None = None) -> dict:
    home = out / f"home-{folder.name}-{mode}"
    shutil.rmtree(home, ignore_errors=True)
    result = out / f"ingest-{folder.name}-{mode}.json"
    env = dict(os.environ, PYTHONPATH=str(src)) if src else None
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(HERE / "_ingest_worker.py"), str(folder), mode if mode != "peer" else "local",
                    str(home), str(result)], check=True, stdout=subprocess.DEVNULL, env=env)
    shutil.rmtree(home, ignore_errors=True)
    return json.loads(result.read_text()) | {"mode": mode, "wall_s": time.perf_counter() - t0}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", default="64,256")
    parser.add_argument("--out", type=Path, default=Path("/tmp/oracle-bench-scale"))
    parser.add_argument("--peer-src", type=Path, default=None)
    args = parser.parse_args(argv)
    modes = ["analyze", "local", "ray"] + (["peer"] if args.peer_src else [])
    rows = []
    for ranks in map(int, args.ranks.split(",")):
        folder = make_job(args.out, ranks)
        runs = [measure(folder, m, args.out, args.peer_src if m == "peer" else None) for m in modes]
        loads = [r for r in runs if r["mode"] != "analyze"]
        assert len({(r["graph_nodes"], r["graph_relationships"], r["nodes_created"]) for r in loads}) == 1, loads
        floor = runs[0]["driver_peak"]
        rows += [r | {"vs_analysis": r["driver_peak"] / floor} for r in runs]
    (args.out / "bench_ingest_scale.json").write_text(json.dumps(rows, indent=1))
    print(f"{'ranks':>6}{'nodes':>11}{'rels':>11}{'mode':>9}{'load s':>8}{'driver MB':>10}{'x analysis':>11}"
          f"{'task MB max':>12}{'task MB med':>12}{'server MB':>10}")
    for r in rows:
        peaks = r.get("task_peaks") or [0]
        print(f"{r['ranks']:>6}{r['nodes']:>11,}{r.get('graph_relationships', 0):>11,}{r['mode']:>9}"
              f"{r.get('load_s', 0):>8.1f}{r['driver_peak'] / MB:>10.0f}{r['vs_analysis']:>11.2f}"
              f"{max(peaks) / MB:>12.0f}{statistics.median(peaks) / MB:>12.0f}{r.get('server_peak', 0) / MB:>10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
