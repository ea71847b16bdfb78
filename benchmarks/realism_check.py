"""Realism check: a single-rank synthetic job beside a real single-GPU training trace of similar shape.

Real: HTA's ``ns_resolution`` sample (one V100 rank, 5 steps, GPU-bound, no NCCL kernels).
Synthetic: ``SynthConfig(model="gpt2-small", hardware="A100")`` on one rank, 5 steps (the closest
hardware we model to a V100; see the README for the differences). Both go through the same
reader and analysis. Prints, per trace: kernels and CPU ops per step, median kernel time, the
GPU's busy share, the median launch gap (kernel start minus the start of its launch call), the
median gap between consecutive kernels on a stream, and the critical-path shares.
Usage: ``python benchmarks/realism_check.py``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.findings.gpu_detectors import gpu_busy_ns
from bottleneck_oracle.graph.types import Category, EdgeType, NodeKind
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces" / "real" / "hta" / "ns_resolution"


def profile(a: Analysis) -> dict[str, float]:
    """The shape of a trace: counts per step, kernel and gap medians, busy and path shares."""
    g = a.graph
    steps = [r for r in a.steps if r.step >= 0 and (r.step, r.rank) not in a.partial_steps]
    n = len(steps)
    kernels = g.kind == NodeKind.KERNEL
    src, dst = g.edges_of(EdgeType.STREAM_NEXT)
    gaps = g.start_ns[dst] - g.end_ns[src]
    launch = g.start_ns[kernels] - g.launch_ns[kernels]
    wall = sum(r.wall_ns for r in steps)
    row = {(int(s), int(r)): i for i, (s, r) in enumerate(zip(g.steps.step, g.steps.rank))}
    busy_ns = gpu_busy_ns(g)
    busy = sum(busy_ns[row[(r.step, r.rank)]] for r in steps)
    out = {
        "steps": n, "step ms (median)": float(np.median([r.wall_ns for r in steps])) / 1e6,
        "kernels / step": kernels.sum() / n, "cpu ops / step": (g.kind == NodeKind.CPU_OP).sum() / n,
        "kernel µs (median)": float(np.median(g.dur_ns[kernels])) / 1e3,
        "launch→start µs (median)": float(np.median(launch[launch > 0])) / 1e3 if (launch > 0).any() else 0.0,
        "kernel gap µs (median)": float(np.median(gaps[gaps >= 0])) / 1e3, "GPU busy": busy / wall,
    }
    for c in Category:
        out[f"path {c.value}"] = sum(r.breakdown_ns[c] for r in steps) / wall
    return out


def main() -> int:
    real = profile(analyze(read_trace(REAL)))
    with tempfile.TemporaryDirectory() as tmp:
        synthesize(Path(tmp), SynthConfig(model="gpt2-small", hardware="A100", steps=5))
        synth = profile(analyze(read_trace(Path(tmp))))
    print(f"{'':28}{'real ns_resolution':>20}{'synthetic gpt2-small':>22}")
    for key in real:
        fmt = "{:>20.1%}" if key.startswith(("path", "GPU")) else "{:>20.1f}"
        print(f"{key:28}" + fmt.format(real[key]) + "  " + fmt.format(synth[key]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
