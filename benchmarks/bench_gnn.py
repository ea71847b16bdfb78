"""Graph model speed: inference CPU time per step against the replay of the same step, and training throughput.

Generates one synthetic job whose steps hold about 10,000 nodes, then measures on the same steps:
- the shipped checkpoint's prediction (CPU ms, one thread), and replaying the DAG with an
  edit (`replay.engine.replay`, the peer): the ratio says what the model's answer costs next to replay's;
  and the interference levers of that replay (`replay.interference`), which the corrected replay adds;
- one training step (forward, backward, AdamW) per graph: graphs/s and nodes/s;
- the peak resident memory of the process.
Usage: ``python benchmarks/bench_gnn.py`` from the repository root (``make bench``).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bottleneck_oracle.analysis.analysis import analyze  # noqa: E402
from bottleneck_oracle.gnn.data import step_graphs  # noqa: E402
from bottleneck_oracle.gnn.edits import edit_features  # noqa: E402
from bottleneck_oracle.gnn.hetero import model_inputs  # noqa: E402
from bottleneck_oracle.gnn.predict import Predictor  # noqa: E402
from bottleneck_oracle.gnn.train import Item, loss_of  # noqa: E402
from bottleneck_oracle.graph.types import NodeKind  # noqa: E402
from bottleneck_oracle.replay.engine import Edit, replay  # noqa: E402
from bottleneck_oracle.replay.interference import interference_levers  # noqa: E402
from bottleneck_oracle.synth import SynthConfig, synthesize  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402


def _cpu_ms(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.process_time()
        fn()
        times.append((time.process_time() - started) * 1e3)
    return float(np.median(times))


def main() -> int:
    with tempfile.TemporaryDirectory() as out:
        synthesize(Path(out), SynthConfig(model="gpt2-small", dp=2, tp=2, steps=4, seed=0))
        a = analyze(read_trace(out))
    graphs = step_graphs(a)
    g = graphs[1]
    edit = Edit(2.0, kinds=(NodeKind.KERNEL,), name="gemm")
    mask = edit.select(a)
    predictor = Predictor()
    edited = edit_features(g, mask[g.node], 2.0)
    print(f"step graph: {len(g):,} nodes, {sum(e.shape[1] for e in g.edges.values()):,} edges; "
          f"trace: {len(a.graph):,} nodes over {len(graphs)} steps")
    torch.set_num_threads(1)
    levers = interference_levers(a, [edit]).lever_ns[g.node] / 1e6
    gnn_ms = _cpu_ms(lambda: predictor.predict_graph(edited, levers))
    replay_ms = _cpu_ms(lambda: replay(a, [edit]))
    per_step_replay = replay_ms / len(graphs)
    per_step_levers = _cpu_ms(lambda: interference_levers(a, [edit])) / len(graphs)
    print("| what | CPU ms per step | per 10k nodes | vs replay |")
    print("|---|---|---|---|")
    print(f"| GNN prediction under the edit (1 thread) | {gnn_ms:.1f} | {gnn_ms / len(g) * 1e4:.1f} "
          f"| {gnn_ms / per_step_replay:.0f}x |")
    print(f"| replay with the edit (whole trace / {len(graphs)} steps) | {per_step_replay:.1f} "
          f"| {per_step_replay / len(g) * 1e4:.1f} | 1.0x |")
    print(f"| replay with the edit and its interference levers | {per_step_levers:.1f} "
          f"| {per_step_levers / len(g) * 1e4:.1f} | {per_step_levers / per_step_replay:.1f}x |")
    torch.set_num_threads(2)
    model = predictor.model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train_step() -> None:
        x, edges, data = model_inputs(g)
        loss = loss_of(model(x, edges), data, g, Item(g, None, 1.0, g.step_ms, g.step_ms, None))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    started = time.perf_counter()
    steps = 5
    for _ in range(steps):
        train_step()
    seconds = (time.perf_counter() - started) / steps
    print(f"\ntraining: {1 / seconds:.2f} graphs/s, {len(g) / seconds:,.0f} nodes/s (2 threads, wall time)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
