"""How long `oracle ask` takes offline on a loaded trace, against reading and analysing the same
trace (the peer: what a user already waits for once): the 2-rank GPT example and the 8-rank DLRM job.

In-process: one ``Conversation`` per trace, questions of several intents asked in turn (the trace
ingested and the models loaded by a first question, not counted). Whole process:
``python -m bottleneck_oracle ask ... --json`` once per intent, against ``oracle analyze --json``
on the same files, both with the trace already in the workspace. The goal: p95 <= 2 s in-process.

Whole-process mode (``--whole 10``): ``oracle ask "Why is step 5 slow?" --trace examples/gpt_2rank``
as a user types it, N times after ``oracle ingest``, each beside an ``oracle analyze --json`` of the same
trace (interleaved, so a busy machine slows both alike); the goal: p95 <= 3 s.

Usage: ``python benchmarks/bench_ask.py [--runs 20]`` or ``python benchmarks/bench_ask.py --whole 10``
from the repository root.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bottleneck_oracle.agent.conversation import Conversation  # noqa: E402
from bottleneck_oracle.analysis.analysis import analyze  # noqa: E402
from bottleneck_oracle.config import Settings  # noqa: E402
from bottleneck_oracle.graphdb import stop_server  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GPT = REPO / "examples" / "gpt_2rank"
DLRM = REPO.parent / "shared" / "traces" / "real" / "param" / "dlrm_8rank_kineto"
GOAL_P95_S = 2.0
GOAL_WHOLE_P95_S = 3.0
# intent -> question ({step}: the trace's slowest step, as the first question found it)
QUESTIONS = {
    "why_slow": "Why is step {step} slow?",
    "straggler": "Which rank is the straggler in step {step}?",
    "critical_path": "What is on the critical path of step {step}?",
    "whatif": "What if the all-reduce were 2x faster in step {step}?",
    "optimize": "What should I change first?",
}


def _seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _process(*args: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bottleneck_oracle", *args], capture_output=True, env=env)
    if out.returncode:
        raise SystemExit(f"oracle {' '.join(args)}: exit {out.returncode}: {out.stderr.decode()[-2000:]}")
    return time.perf_counter() - started


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def _in_process(settings: Settings, path: Path, runs: int) -> tuple[int, float, dict[str, list[float]]]:
    """The slowest step, the first question's time (ingests, loads the models), each intent's times."""
    times: dict[str, list[float]] = {intent: [] for intent in QUESTIONS}
    with Conversation(settings, trace=str(path), llm="offline") as conversation:
        started = time.perf_counter()
        first = conversation.ask("Is anything wrong with this trace?")
        first_s = time.perf_counter() - started
        if first.step is None:
            raise SystemExit(f"{path}: the first answer names no step: {first.answer}")
        intents = list(QUESTIONS)
        for i in range(runs):
            intent = intents[i % len(intents)]
            answer = conversation.ask(QUESTIONS[intent].format(step=first.step))
            if not answer.answered:
                raise SystemExit(f"{path}: {answer.question!r} was not answered: {answer.reason}")
            times[intent].append(answer.seconds)
    return first.step, first_s, times


def _bench(name: str, path: Path, runs: int, process_runs: int) -> list[tuple[str, ...]]:
    trace = read_trace(path, workers=2)
    analyse_s = float(np.median([_seconds(lambda: analyze(trace)) for _ in range(3)]))
    read_s = float(np.median([_seconds(lambda: analyze(read_trace(path, workers=2))) for _ in range(3)]))
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), workers=2)
        env = {**os.environ, "ORACLE_HOME": home, "ORACLE_WORKERS": "2"}
        try:
            step, first_s, times = _in_process(settings, path, runs)
            asks = [t for ts in times.values() for t in ts]
            analyze_p = float(np.median([_process("analyze", str(path), "--json", env=env) for _ in range(3)]))
            process = [_process("ask", QUESTIONS[intent].format(step=step), "--trace", str(path), "--json", env=env)
                       for intent in list(QUESTIONS)[:process_runs]]
        finally:
            stop_server(Path(home))
    print(f"{name}: {len(trace.events):,} events, {len(trace.ranks)} ranks, step {step}; "
          f"first question (ingest + models) {first_s:.2f} s")
    rows.append((name, "analysis alone, in-process", "3", f"{analyse_s:.3f}", f"{analyse_s:.3f}",
                 f"{analyse_s / read_s:.2f}", f"{analyse_s / read_s:.2f}"))
    rows.append((name, "read + analysis, in-process (peer)", "3", f"{read_s:.3f}", f"{read_s:.3f}", "1.00", "1.00"))
    rows.append((name, "ask, in-process", str(len(asks)), f"{_p(asks, 50):.3f}", f"{_p(asks, 95):.3f}",
                 f"{_p(asks, 50) / read_s:.2f}", f"{_p(asks, 95) / read_s:.2f}"))
    for intent, ts in times.items():
        if ts:
            rows.append((name, f"  {intent}", str(len(ts)), f"{_p(ts, 50):.3f}", f"{_p(ts, 95):.3f}",
                         f"{_p(ts, 50) / read_s:.2f}", f"{_p(ts, 95) / read_s:.2f}"))
    rows.append((name, "oracle analyze --json (peer)", "3", f"{analyze_p:.3f}", f"{analyze_p:.3f}", "1.00", "1.00"))
    rows.append((name, "oracle ask --json", str(len(process)), f"{_p(process, 50):.3f}", f"{_p(process, 95):.3f}",
                 f"{_p(process, 50) / analyze_p:.2f}", f"{_p(process, 95) / analyze_p:.2f}"))
    return rows


def _whole(runs: int) -> int:
    """``oracle ask`` as a whole process on the demo trace, after ingest, against ``oracle analyze --json``."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "ORACLE_HOME": home}
        try:
            _process("ingest", str(GPT), env=env)
            _process("ask", "Why is step 5 slow?", "--trace", str(GPT), env=env)  # fills the vector cache once
            asks, analyses = [], []
            for _ in range(runs):
                asks.append(_process("ask", "Why is step 5 slow?", "--trace", str(GPT), env=env))
                analyses.append(_process("analyze", str(GPT), "--json", env=env))
        finally:
            stop_server(Path(home))
    p95, peer = _p(asks, 95), _p(analyses, 95)
    print(f"whole process, {runs} runs each, gpt_2rank loaded:")
    print(f"  oracle ask 'Why is step 5 slow?'  p50 {_p(asks, 50):.2f} s  p95 {p95:.2f} s  max {max(asks):.2f} s")
    print(f"  oracle analyze --json (peer)      p50 {_p(analyses, 50):.2f} s  p95 {peer:.2f} s  max {max(analyses):.2f} s")
    print(f"  p95 ratio ask/analyze {p95 / peer:.2f}; goal p95 <= {GOAL_WHOLE_P95_S:g} s: "
          f"{'met' if p95 <= GOAL_WHOLE_P95_S else 'NOT met'}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="in-process questions per trace")
    parser.add_argument("--process-runs", type=int, default=len(QUESTIONS), help="whole-process asks per trace")
    parser.add_argument("--whole", type=int, default=0, metavar="N",
                        help="only the whole-process demo question, N runs beside oracle analyze --json")
    args = parser.parse_args()
    if args.whole:
        return _whole(args.whole)
    missing = [p for p in (GPT, DLRM) if not p.is_dir()]
    if missing:
        print(f"{missing[0]}: not found (the real traces live in ../shared)")
        return 1
    rows = _bench("gpt_2rank", GPT, args.runs, args.process_runs)
    rows += _bench("dlrm_8rank", DLRM, args.runs, args.process_runs)
    header = ("trace", "what", "n", "p50 s", "p95 s", "p50/peer", "p95/peer")
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    worst = max(float(r[4]) for r in rows if r[1] == "ask, in-process")
    print(f"goal: in-process p95 <= {GOAL_P95_S:g} s: {'met' if worst <= GOAL_P95_S else 'NOT met'} "
          f"(worst p95 {worst:.3f} s); peer of each ratio: reading and analysing the same trace, in the same mode")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
