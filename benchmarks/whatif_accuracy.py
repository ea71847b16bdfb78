"""What-if accuracy on the synthetic corpus's held-out families: every edit a job can be given
(``whatif.accuracy.job_edits``), predicted by each predictor and measured on the job simulated
again, as MAPE per edit type for the test and out-of-distribution splits. Prints the README's
table and writes every score to ``benchmarks/.work/whatif_accuracy.json``; then the fix of one job
per injectable category (``whatif.accuracy.FAULT_JOBS``).

Usage: ``python benchmarks/whatif_accuracy.py [--n 60] [--seed 0]`` from the repository root: the
test and ood samples of ``plan_dataset(n, seed)`` (the plan `oracle dataset build` follows).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bottleneck_oracle.synth.config import SynthConfig  # noqa: E402
from bottleneck_oracle.synth.dataset import plan_dataset  # noqa: E402
from bottleneck_oracle.truth.injection import parse_injection  # noqa: E402
from bottleneck_oracle.whatif.accuracy import FAULT_JOBS, mape_table, score_jobs  # noqa: E402
from bottleneck_oracle.workspace.whatif import graph_model  # noqa: E402

WORK = Path(__file__).resolve().parent / ".work"
PREDICTORS = ("replay", "gnn_replay", "gnn", "schedule", "chosen")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="score only edits of this type (e.g. data_parallel)")
    args = parser.parse_args()
    samples = [s for s in plan_dataset(args.n, args.seed) if s.split in ("test", "ood")]
    model = graph_model()
    started = time.perf_counter()
    scores = {}
    for split in ("test", "ood"):
        jobs = [(s.sample_id, s.config) for s in samples if s.split == split]
        scores[split] = score_jobs(jobs, model, only=args.only, progress=lambda i, name, n=len(jobs): print(
            f"  {i}/{n} {name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True))
    out = WORK / f"whatif_accuracy{'_' + args.only if args.only else ''}.json"
    WORK.mkdir(exist_ok=True)
    out.write_text(json.dumps({split: [asdict(s) for s in rows] for split, rows in scores.items()}, indent=1))
    tables = {split: mape_table(rows) for split, rows in scores.items()}
    kinds = sorted(set(tables["test"]) | set(tables["ood"]))
    print("| edit type | split | n | " + " | ".join(PREDICTORS) + " |")
    print("|---|---|---|" + "---|" * len(PREDICTORS))
    for kind in kinds:
        for split in ("test", "ood"):
            row = tables[split].get(kind)
            if row is None:
                continue
            cells = [f"{row[p]:.2f}" if p in row else "" for p in PREDICTORS]
            skipped = f" (+{row['skipped']} not found)" if row["skipped"] else ""
            print(f"| {kind} | {split} | {row['n']}{skipped} | " + " | ".join(cells) + " |")
    if args.only:
        return 0
    faults = score_jobs([(category, SynthConfig(injections=(parse_injection(inject),), **settings))
                         for category, (inject, settings) in FAULT_JOBS.items()], model)
    scores["faults"] = [s for s in faults if s.edit_type.startswith("fix:")]
    out.write_text(json.dumps({split: [asdict(s) for s in rows] for split, rows in scores.items()}, indent=1))
    print("\n| fault (one job each) | recorded ms | predicted ms | re-simulated ms | error |")
    print("|---|---|---|---|---|")
    for s in scores["faults"]:
        print(f"| `{FAULT_JOBS[s.job][0]}` | {s.baseline_ms:.2f} | {s.predicted_ms.get(s.chosen, float('nan')):.2f} "
              f"({s.chosen}) | {s.measured_ms:.2f} | {s.error_pct(s.chosen):+.2f}% |")
    print(f"\n{sum(len(r) for r in scores.values())} predictions in {time.perf_counter() - started:.0f} s; "
          f"scores in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
