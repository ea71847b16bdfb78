"""What-if against real re-captures: a small GPT trained by two gloo ranks on this CPU
(``oracle capture``), predicted under an edit and captured again with it. Fixes of an injected
stall, straggler, pause and checkpoint; other micro-batch counts of a two-stage pipeline; other
data-parallel degrees. Each error is the predicted step against the re-captured one, beside the
re-capture's own spread (the median deviation of its steps) and the drift of the machine's speed
between the two captures (their clean steps' medians), which bound what can be claimed.

Usage: ``python benchmarks/whatif_captured.py`` from the repository root, on a quiet machine.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bottleneck_oracle.analysis.analysis import Analysis, analyze  # noqa: E402
from bottleneck_oracle.capture.capture import capture  # noqa: E402
from bottleneck_oracle.capture.config import CaptureConfig, parse_injection  # noqa: E402
from bottleneck_oracle.errors import ConfigError, OracleError  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402
from bottleneck_oracle.truth.edits import Edit, parse_edit  # noqa: E402
from bottleneck_oracle.whatif.predict import baseline_ms, check_step, predict_whatif  # noqa: E402
from bottleneck_oracle.whatif.verify import rerun  # noqa: E402

MODEL = {"layers": 4, "d_model": 128, "heads": 4, "seq_len": 64, "batch_size": 16, "vocab": 512, "timeout_s": 300}
FAULTS = ["dataloader_stall@4:0=150ms", "straggler_rank@4:1=150ms", "host_pause@4:0=150ms", "checkpoint_stall@4:1=64MB"]


def _walls(a: Analysis, but: int | None = None) -> np.ndarray:
    steps = sorted({r.step for r in a.steps if (r.step, r.rank) not in a.partial_steps} - {but})
    return np.array([baseline_ms(a, s) for s in steps])


def _row(name: str, a: Analysis, folder: Path, edit: Edit, step: int, whole_job: bool) -> None:
    try:
        predicted = predict_whatif(a, step, [edit])
    except ConfigError as e:
        print(f"| {name} | `{edit}` | not predicted: {e} |")
        return
    try:
        again = rerun(folder, [edit])
    except OracleError as e:  # a re-capture the analysis refuses is a result too
        print(f"| {name} | `{edit}` | re-capture not analysed: {e} |")
        return
    walls = _walls(again)
    spread = 100 * float(np.median(np.abs(walls - np.median(walls)))) / float(np.median(walls))
    # how far the machine's speed moved between the capture and the re-capture (their clean steps)
    before = _walls(a, None if whole_job else step)
    drift = 100 * (float(np.median(walls)) - float(np.median(before))) / float(np.median(before))
    if whole_job:  # a new schedule or degree: every step changes, compare the medians of the steps
        measured = float(np.median(walls))
        steps = sorted({r.step for r in a.steps if (r.step, r.rank) not in a.partial_steps})
        ours = float(np.median([predict_whatif(a, s, [edit]).best_ms for s in steps]))
    else:
        measured, ours = baseline_ms(again, step), predicted.best_ms
    error = 100 * (ours - measured) / measured
    recorded = float(np.median(_walls(a))) if whole_job else predicted.baseline_ms
    print(f"| {name} | `{edit}` | {recorded:.1f} | {ours:.1f} ({predicted.chosen}) | {measured:.1f} | "
          f"{error:+.1f}% | {spread:.1f}% | {drift:+.1f}% |")


def main() -> int:
    print("| job | edit | recorded ms | predicted ms | re-captured ms | error | re-capture spread | machine drift |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(FAULTS):
            folder = Path(tmp) / f"fault{i}"
            capture(folder, CaptureConfig(ranks=2, steps=6, injections=(parse_injection(text),), **MODEL))
            a = analyze(read_trace(folder))
            _row(text, a, folder, Edit.fix(text.split("@")[0], 4), 4, whole_job=False)
        folder = Path(tmp) / "pipeline"
        capture(folder, CaptureConfig(ranks=2, steps=6, pipeline=2, microbatches=4, **MODEL))
        a = analyze(read_trace(folder))
        for k in (2, 8):
            _row("pipeline 2 stages, 4 micro-batches", a, folder, parse_edit(f"microbatches={k}"),
                 check_step(a, None), whole_job=True)
        folder = Path(tmp) / "ddp"
        capture(folder, CaptureConfig(ranks=2, steps=6, **MODEL))
        a = analyze(read_trace(folder))
        for d in (1, 4):
            _row("DDP 2 ranks", a, folder, parse_edit(f"data_parallel={d}"), check_step(a, None), whole_job=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
