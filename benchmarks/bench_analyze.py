"""Benchmark: `oracle analyze --json` as users run it against HTA doing the same work and the parse floor.

Measured in one run, each a whole process started fresh, on:
  - df_index_resolver (216k events, one rank) from HTA's own test data;
  - a 1M-event, 8-rank trace made by repeating the steps of the real 8-rank DLRM job.
For each: (a) ours: `python -m bottleneck_oracle analyze TRACE --json > FILE`: import, read, critical
path, breakdown and findings of every step of every rank, the report written;
(b) HTA 0.5.0 in its own venv: load + critical path for every step of every rank;
(c) the floor: gunzip + orjson.loads of the same files. Prints wall-time ratios and peak memory
(the larger of the largest process's RSS and the sampled PSS of the whole process tree) against
the uncompressed trace size. Usage: ``python benchmarks/bench_analyze.py [--skip-hta]``.
"""

from __future__ import annotations

import compileall
import gzip
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _hta_peer import WORK_DIR, measure_child, run_hta, run_parse_floor, trace_files  # noqa: E402
from make_large_trace import DEFAULT_OUT, DEFAULT_SRC, make_large_trace  # noqa: E402

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces" / "real"
MB = 1024 * 1024


def _raw_bytes(trace_dir: Path) -> int:
    total = 0
    for f in trace_files(trace_dir):
        with gzip.open(f) if f.name.endswith(".gz") else open(f, "rb") as fh:
            while chunk := fh.read(1 << 24):
                total += len(chunk)
    return total


def run_ours(trace_dir: Path, workers: int) -> dict:
    """The whole command, its JSON document written to a file as a pipeline would take it."""
    run_dir = WORK_DIR / "runs" / f"ours-w{workers}-{trace_dir.name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    out = run_dir / "analyze.json"
    child = measure_child([sys.executable, "-m", "bottleneck_oracle", "analyze", trace_dir, "--json", "--partial"],
                          log_path=out, env={**os.environ, "ORACLE_WORKERS": str(workers)}, timeout_s=900)
    if child.returncode != 0:
        raise RuntimeError(f"oracle analyze failed on {trace_dir}, see {out}")
    report = json.loads(out.read_text())
    return {"wall_s": child.wall_s, "peak_bytes": child.peak_bytes, "events": report["trace"]["events"],
            "critical_paths": len(report["steps"]), "json_mb": out.stat().st_size / MB}


def bench(name: str, trace_dir: Path, skip_hta: bool) -> dict:
    raw = _raw_bytes(trace_dir)
    ours = run_ours(trace_dir, workers=2)
    ours1 = run_ours(trace_dir, workers=1)
    floor = run_parse_floor(trace_dir)
    row = {"name": name, "events": ours["events"], "raw_mb": raw / MB, "critical_paths": ours["critical_paths"],
           "ours_s": ours["wall_s"], "ours_1proc_s": ours1["wall_s"], "ours_peak_mb": ours["peak_bytes"] / MB,
           "json_mb": ours["json_mb"],
           "floor_s": floor.child.wall_s, "floor_peak_mb": floor.child.peak_bytes / MB}
    if not skip_hta:
        hta = run_hta(trace_dir)
        row.update(hta_s=hta.child.wall_s, hta_peak_mb=hta.child.peak_bytes / MB,
                   hta_steps_ok=f"{sum(s.ok for s in hta.steps)}/{len(hta.steps)}")
    return row


def main(argv: list[str]) -> int:
    skip_hta = "--skip-hta" in argv
    # bytecode as an installed package has it (HTA's venv got its own from pip), not compiled per run
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "bottleneck_oracle", quiet=1)
    large = make_large_trace(DEFAULT_SRC, DEFAULT_OUT)
    rows = [bench("df_index_resolver", REAL / "hta" / "df_index_resolver", skip_hta),
            bench("dlrm 8 ranks x39 steps", large, skip_hta)]
    (WORK_DIR / "bench_analyze.json").write_text(json.dumps(rows, indent=1))
    print(f"{'trace':<24}{'events':>10}{'raw MB':>8}{'paths':>7}{'ours s':>8}{'1-proc s':>9}{'floor s':>8}"
          f"{'HTA s':>8}{'HTA/ours':>9}{'ours/floor':>11}{'ours RSS/raw':>13}{'HTA RSS/raw':>12}{'JSON MB':>9}")
    for r in rows:
        hta_s = r.get("hta_s")
        print(f"{r['name']:<24}{r['events']:>10,}{r['raw_mb']:>8.0f}{r['critical_paths']:>7}{r['ours_s']:>8.2f}"
              f"{r['ours_1proc_s']:>9.2f}{r['floor_s']:>8.2f}{(hta_s or float('nan')):>8.1f}"
              f"{(hta_s or float('nan')) / r['ours_s']:>9.1f}{r['ours_s'] / r['floor_s']:>11.2f}"
              f"{r['ours_peak_mb'] / r['raw_mb']:>13.2f}"
              f"{r.get('hta_peak_mb', float('nan')) / r['raw_mb']:>12.2f}{r['json_mb']:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
