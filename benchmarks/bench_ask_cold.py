"""How long the first `oracle ask` about a new trace takes, as a whole process in a fresh workspace (cold: the
trace read, analysed and loaded by the question, the database server started), and the same question asked
again (warm), against `oracle analyze --json` of the same trace in a fresh workspace (the peer: reading and
analysing, what any first look at a trace costs). The goal: every cold ask <= 5 s on a 2-core machine.

Traces: Kineto's public ResNet-50 trace (`tests/data/resnet50_loader_workers/june/nw0`, when present) and the
demo's `examples/gpt_2rank`. The model caches (`$ORACLE_CACHE`: the intent vectors) are as `make setup` left
them. Each round asks every question once, each in a workspace of its own, interleaved with its peer so that
a busy machine slows both alike. `--eager` adds `oracle ingest` (everything: playbook, load, finding
embeddings, the graph model's predictions), what a cold ask did before it loaded only what the question needs.

Usage: ``python benchmarks/bench_ask_cold.py [--rounds 3] [--eager]`` from the repository root.
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

from bottleneck_oracle.graphdb import stop_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TRACES = {"resnet50_nw0": REPO / "tests" / "data" / "resnet50_loader_workers" / "june" / "nw0",
          "gpt_2rank": REPO / "examples" / "gpt_2rank"}
GOAL_COLD_S = 5.0
QUESTIONS = ("why is my training slow?", "What is the main bottleneck of this training job?",
             "Did any iteration run abnormally long?", "which kernels take the most time?", "why is step 5 slow?",
             "what if the dataloader were fixed?")


def _process(*args: str, home: str) -> float:
    env = {**os.environ, "ORACLE_HOME": home}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bottleneck_oracle", *args], capture_output=True, env=env)
    seconds = time.perf_counter() - started
    if out.returncode not in (0, 2):  # 2: the question names what the trace lacks (a step), answered
        raise SystemExit(f"oracle {' '.join(args)}: exit {out.returncode}: {out.stderr.decode()[-2000:]}")
    return seconds


def _fresh(fn: Callable[[str], float]) -> float:
    """``fn`` run in a new workspace, its database server stopped after."""
    with tempfile.TemporaryDirectory() as home:
        try:
            return fn(home)
        finally:
            stop_server(Path(home))


def _round(path: Path, eager: bool) -> dict[str, list[float]]:
    """One round over the questions: each its cold and warm ask, beside a cold analyze of the trace."""
    times: dict[str, list[float]] = {"analyze": [], "ingest": []}

    def ask(question: str, home: str) -> float:
        cold = _process("ask", question, "--trace", str(path), home=home)
        times.setdefault(f"warm {question}", []).append(_process("ask", question, "--trace", str(path), home=home))
        return cold

    for question in QUESTIONS:
        times["analyze"].append(_fresh(lambda home: _process("analyze", str(path), "--json", home=home)))
        times.setdefault(f"cold {question}", []).append(_fresh(lambda home, q=question: ask(q, home)))
    if eager:
        times["ingest"].append(_fresh(lambda home: _process("ingest", str(path), home=home)))
    return times


def _bench(name: str, path: Path, rounds: int, eager: bool) -> list[tuple[str, ...]]:
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for key, values in _round(path, eager).items():
            times.setdefault(key, []).extend(values)
    peer = float(np.median(times["analyze"]))
    rows = [(name, "oracle analyze --json, cold (peer)", str(len(times["analyze"])), f"{peer:.2f}",
             f"{max(times['analyze']):.2f}", "1.00")]
    if times["ingest"]:
        ingest = times["ingest"]
        rows.append((name, "oracle ingest, cold (everything)", str(len(ingest)), f"{np.median(ingest):.2f}",
                     f"{max(ingest):.2f}", f"{np.median(ingest) / peer:.2f}"))
    for kind in ("cold", "warm"):
        for question in QUESTIONS:
            ts = times[f"{kind} {question}"]
            rows.append((name, f"{kind} ask {question!r}", str(len(ts)), f"{np.median(ts):.2f}", f"{max(ts):.2f}",
                         f"{np.median(ts) / peer:.2f}"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="times each question is asked cold (and warm)")
    parser.add_argument("--eager", action="store_true", help="also time `oracle ingest`: everything, eagerly")
    args = parser.parse_args()
    rows: list[tuple[str, ...]] = []
    for name, path in TRACES.items():
        if not path.is_dir():
            print(f"{path}: not found, skipped")
            continue
        rows += _bench(name, path, args.rounds, args.eager)
    header = ("trace", "what", "n", "p50 s", "max s", "p50/peer")
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    worst = max(float(r[4]) for r in rows if r[1].startswith("cold ask"))
    print(f"goal: every cold ask <= {GOAL_COLD_S:g} s: {'met' if worst <= GOAL_COLD_S else 'NOT met'} (slowest "
          f"{worst:.2f} s); peer: `oracle analyze --json` of the same trace in a fresh workspace, same rounds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
