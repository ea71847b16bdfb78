"""Benchmark: many ranks analysed whole and scanned one rank at a time, through the local executor and through
Ray with 1 and 2 workers, in one run.

Synthetic jobs (7b, tp 4 x pp 2, data parallel 8, 32 and 128: 64, 256 and 1,024 ranks, 2 steps) are written
by the simulator, then each is run by ``_scale_worker.py`` in a fresh process per mode and executor:
``analyze`` reads every rank into the driver and analyses the job's graph; ``scan`` (``job/scan.py``) reduces
each rank to a summary where its task runs and joins the summaries, stitching each step's critical path
through the ranks; ``lean`` scans without critical paths (``oracle scan --no-paths``). Wall time, the
driver's peak RSS and each task's peak RSS where it ran, against the number of ranks; a digest of the
analysis that must be the same for every executor, and one of what a scan reports (steps, breakdowns,
critical paths segment by segment, stragglers, every finding with the causes, GPU timeline) that must equal the
whole analysis's.
``--modes replay,lean-replay`` replays an edit (``scale op=allreduce x2``) over the job's whole graph and rank by
rank (``oracle scan --no-paths --whatif``): every step's wall on every rank under it must be the same.
``--modes model,lean-model,lean-model-all`` asks the graph model: ``Predictor.predict`` on the whole analysis, and
rank by rank (``oracle scan --no-paths --model``) with steps cut to 200,000 nodes as the whole one cuts them (every
step's walk the same, its predicted time within 1e-5), and with no cut (every rank of every step).
Usage: ``python benchmarks/bench_scale.py [--ranks 64,256,1024] [--local-only] [--scan-only] [--modes M,...]
[--out DIR]``;
``--ranks 4096 --local-only`` is the largest job this 24 GB machine analyses whole (Ray's driver holds more
than the local one's); ``--ranks 4096 --scan-only`` scans it with every executor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bottleneck_oracle.synth import synthesize
from bottleneck_oracle.synth.config import SynthConfig

HERE = Path(__file__).resolve().parent
MB = 1024 * 1024
EXECUTORS = (("local", 2), ("ray", 1), ("ray", 2))  # executor, workers (Ray: the CPUs of the Ray it starts)


def make_job(out: Path, ranks: int) -> Path:
    folder = out / f"job{ranks}"
    if not (folder / "manifest.json").exists():
        synthesize(folder, SynthConfig(model="7b", dp=ranks // 8, tp=4, pp=2, microbatches=2, steps=2),
                   workers=os.cpu_count() or 1)
    return folder


def measure(folder: Path, mode: str, kind: str, workers: int) -> dict:
    result = folder.parent / f"result-{folder.name}-{mode}-{kind}{workers}.json"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(HERE / "_scale_worker.py"), str(folder), mode, kind, str(workers), str(result)],
                   check=True, stdout=subprocess.DEVNULL)
    row = json.loads(result.read_text())
    row["wall_s"] = time.perf_counter() - t0
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", default="64,256,1024")
    parser.add_argument("--out", type=Path, default=Path("/tmp/oracle-bench-scale"))
    parser.add_argument("--local-only", action="store_true", help="only the local executor")
    parser.add_argument("--scan-only", action="store_true", help="only scans (no whole analysis)")
    parser.add_argument("--modes", help="these modes only, e.g. replay,lean-replay (a what-if: the job's graph "
                        "replayed whole, and rank by rank)")
    args = parser.parse_args(argv)
    executors = EXECUTORS[:1] if args.local_only else EXECUTORS
    modes = ("scan", "lean") if args.scan_only else ("analyze", "scan", "lean")
    modes = tuple(args.modes.split(",")) if args.modes else modes
    rows = []
    for ranks in map(int, args.ranks.split(",")):
        folder = make_job(args.out, ranks)
        files = [f for f in folder.iterdir() if f.name.endswith(".json.gz")]
        raw_gz = sum(f.stat().st_size for f in files)
        runs = [measure(folder, mode, kind, workers) for mode in modes for kind, workers in executors]
        assert len({r["digest"] for r in runs if r["mode"] == "analyze"}) <= 1, f"{ranks} ranks: the executors disagree"
        for key in ("scan_digest", "lean_digest", "replay_digest", "model_digest"):
            assert len({r[key] for r in runs if key in r}) <= 1, f"{ranks} ranks: a scan disagrees ({key})"
        predicted = [r["model_ms"] for r in runs if "model_ms" in r]
        assert all(abs(a / b - 1) < 1e-5 for ms in predicted for a, b in zip(ms, predicted[0])), f"{ranks} ranks: model"
        rows += [{**r, "raw_gz_mb": raw_gz / MB} for r in runs]
    (args.out / "bench_scale.json").write_text(json.dumps(rows, indent=1))
    print(f"{'ranks':>6}{'events':>12}{'gz MB':>7}{'mode':>8}{'executor':>9}{'wall s':>8}{'start s':>8}{'read s':>7}"
          f"{'work s':>7}{'driver MB':>10}{'MB/rank':>8}{'task MB max':>12}{'task MB med':>12}{'summary KB/rank':>16}")
    for r in rows:
        peaks, summary = r["task_peaks"], r.get("summary_bytes")
        print(f"{r['ranks']:>6}{r['events']:>12,}{r['raw_gz_mb']:>7.0f}{r['mode']:>8}{r['executor'] + str(r['workers']):>9}"
              f"{r['wall_s']:>8.1f}{r['start_s']:>8.1f}{r['read_s']:>7.1f}{r['work_s']:>7.1f}{r['driver_peak'] / MB:>10.0f}"
              f"{r['driver_peak'] / MB / r['ranks']:>8.2f}{max(peaks) / MB:>12.0f}{statistics.median(peaks) / MB:>12.0f}"
              + (f"{statistics.median(summary) / 1024:>16.1f}" if summary else ""))
    print("every scan's report equals the whole analysis's on its job (one scan digest and one lean digest per job)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
