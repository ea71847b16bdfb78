"""Detection on synthetic jobs: for each injected bottleneck, what the analysis found and how big it said it was.

Runs the cases of ``tests/findings/test_detection.py`` (one 4-step synthetic job per case, the fault at
step 3) and prints a Markdown table: the injection, the truth's measured cost, the finding of that
category with the largest impact (step, ranks, impact), the slow steps, and the top-ranked finding.
Usage: ``python benchmarks/detection_table.py`` from the repository root.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.analysis.synth_cases import synth_case  # noqa: E402
from tests.findings.test_detection import CASES  # noqa: E402


def main() -> int:
    print("| injected | job | truth ms | found on | impact ms | slow steps | top finding |")
    print("|---|---|---|---|---|---|---|")
    missed = 0
    for inject, job, _ in CASES:
        a, manifest = synth_case(inject=inject, **job)
        (truth,) = manifest.ground_truth
        found = [f for f in a.findings if f.category.value == truth.category]
        shape = f"{job['model']} dp{job.get('dp', 1)} pp{job.get('pp', 1)} {job.get('hardware', 'H100')}"
        top = a.findings[0].category.value if a.findings else "-"
        slow = sorted({s.step for s in a.slow_steps})
        if not found:
            missed += 1
            print(f"| `{inject}` | {shape} | {truth.injected_ms:.1f} | not found | - | {slow} | {top} |")
            continue
        f = max(found, key=lambda f: f.impact_ms)
        ranks = ",".join(map(str, f.ranks))
        print(f"| `{inject}` | {shape} | {truth.injected_ms:.1f} | step {f.step} rank {ranks} "
              f"| {f.impact_ms:.1f} | {slow} | {top} |")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
