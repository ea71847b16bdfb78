"""Records real what-if pairs on a GPU: one small training job run twice, once as it is and once with one thing
changed, each run a Kineto trace, with the change written in the edit language (``whatif.json``, the layout
``whatif/accuracy.py``'s ``real_pairs`` reads: ``{"edit", "before", "rerun"}``).

The pairs (``PAIRS``):

- ``loader_workers``: a data loader whose items take CPU time, with 0 workers and then 4
  (``fix dataloader_stall``); the one pair that also runs on a CPU, which the tests use.
- ``grad_norm_log``: one step logs every parameter's gradient norm with ``.item()`` (a blocking sync each,
  the GPU drained every time), then no step does (``fix host_sync step=6``: the findings name a step with
  many more syncs than its peers).
- ``tf32``: matmuls in FP32, then TF32 (``scale op=gemm xK``). K is what the two runs measured, the GEMM
  kernels' median time a step before over after, so the pair judges how the replay turns faster kernels into
  a step time, not a guess of K (``"k_from": "measured"`` in ``whatif.json``).

Copy a pair folder under ``tests/data/`` and run ``tools/calibrate_whatif.py``; the pair then counts in every
interval and in ``oracle eval``.

Usage: ``python tools/capture_gpu_pairs.py OUT [--pairs tf32,grad_norm_log,loader_workers] [--device cuda]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bottleneck_oracle.analysis import analyze  # noqa: E402
from bottleneck_oracle.analysis.diff import steady_steps  # noqa: E402
from bottleneck_oracle.capture._gpt import GPT  # noqa: E402
from bottleneck_oracle.replay.node_edits import select_nodes  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402
from bottleneck_oracle.truth.edits import Selector, edit_to_json, parse_edit  # noqa: E402

WAIT, WARMUP, ACTIVE = 1, 2, 6  # the profiler's schedule: 6 recorded steps, as Kineto's samples


@dataclass(frozen=True)
class Job:
    """One run's settings."""

    device: str = "cuda"
    layers: int = 4
    d_model: int = 512
    heads: int = 8
    seq_len: int = 256
    batch_size: int = 16
    vocab: int = 8192
    item_ms: float = 0.0  # CPU time each data item takes to make (a loader's preprocessing)
    num_workers: int = 0
    grad_norm_log_step: int = -1  # the iteration that logs each gradient's norm with .item() (-1: none)
    tf32: bool = False


class SlowTokens(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Random token rows whose every item busies the CPU ``item_ms`` first (decoding, augmenting)."""

    def __init__(self, job: Job, count: int) -> None:
        self.data = torch.randint(job.vocab, (count, job.seq_len + 1), generator=torch.Generator().manual_seed(0))
        self.item_s = job.item_ms / 1e3

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        end = time.perf_counter() + self.item_s
        while time.perf_counter() < end:  # CPU work, not a sleep: a worker process takes it off the main one
            pass
        row = self.data[index]
        return row[:-1], row[1:]


def run(job: Job, out: Path) -> Path:
    """Trains ``job`` for the profiler's schedule and writes its trace to ``out/rank0.pt.trace.json.gz``."""
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = job.tf32
    torch.backends.cudnn.allow_tf32 = job.tf32
    device = torch.device(job.device)
    model = GPT(job.vocab, job.seq_len, job.d_model, job.heads, job.layers).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = WAIT + WARMUP + ACTIVE
    loader = DataLoader(SlowTokens(job, steps * job.batch_size), job.batch_size, num_workers=job.num_workers)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "rank0.pt.trace.json"
    with profile(activities=activities, schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
        for i, (tokens, targets) in enumerate(loader):  # iteration i is ProfilerStep#i
            loss = model(tokens.to(device, non_blocking=True), targets.to(device, non_blocking=True))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if i == job.grad_norm_log_step:  # a logging loop: each .item() waits for the GPU to drain
                for param in model.parameters():
                    param.grad.norm().item()
            optimizer.step()
            prof.step()
    with raw.open("rb") as src, gzip.open(out / "rank0.pt.trace.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    return out


def gemm_ms_per_step(folder: Path) -> float:
    """The median time a steady step's GEMM kernels take (ms), as the edit ``op=gemm`` picks them."""
    a = analyze(read_trace(folder))
    g = a.graph
    gemm = select_nodes(g, Selector(op="gemm"))
    steady = steady_steps(a).steady
    return float(np.median([g.dur_ns[gemm & (g.step == s)].sum() / 1e6 for s in steady]))


@dataclass(frozen=True)
class Pair:
    """A change: the job before, the job after, and the edit that says it (``edit_of`` may read both runs)."""

    before: Job
    after: Job
    edit_of: Callable[[Path, Path], str]


def _tf32_edit(before: Path, after: Path) -> str:
    return f"scale op=gemm x{gemm_ms_per_step(before) / gemm_ms_per_step(after):.3f}"


PAIRS: dict[str, Callable[[Job], Pair]] = {
    "loader_workers": lambda j: Pair(replace(j, item_ms=3.0), replace(j, item_ms=3.0, num_workers=4),
                                     lambda b, a: "fix dataloader_stall"),
    "grad_norm_log": lambda j: Pair(replace(j, grad_norm_log_step=6), j, lambda b, a: "fix host_sync step=6"),
    "tf32": lambda j: Pair(j, replace(j, tf32=True), _tf32_edit),
}


def capture_pair(name: str, base: Job, out: Path) -> Path:
    """Runs pair ``name`` on ``base`` into ``out/name`` (``before/``, ``rerun/``, ``whatif.json``,
    ``manifest.json``); returns that folder."""
    pair = PAIRS[name](base)
    folder = out / name
    before, rerun = run(pair.before, folder / "before"), run(pair.after, folder / "rerun")
    edit = pair.edit_of(before, rerun)
    entry = {"edit": edit_to_json(parse_edit(edit)), "before": "before", "rerun": "rerun"}
    if name == "tf32":
        entry["k_from"] = "measured"
    (folder / "whatif.json").write_text(json.dumps({"edits": [entry]}) + "\n")
    gpu = torch.cuda.get_device_name() if base.device == "cuda" else platform.processor() or "cpu"
    manifest = {"pair": name, "edit": edit, "before": asdict(pair.before), "after": asdict(pair.after),
                "torch": torch.__version__, "device": gpu, "recorded": time.strftime("%Y-%m-%d %H:%M:%S")}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return folder


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", default=",".join(PAIRS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a tiny model (a CPU's dry run)")
    args = parser.parse_args(argv)
    names = [n for n in args.pairs.split(",") if n]
    unknown = sorted(set(names) - set(PAIRS))
    if unknown:
        print(f"capture_gpu_pairs: unknown pair(s) {', '.join(unknown)} (known: {', '.join(PAIRS)})", file=sys.stderr)
        return 2
    base = Job(device=args.device)
    if args.small:
        base = replace(base, layers=1, d_model=64, heads=2, seq_len=32, batch_size=4, vocab=256)
    for name in names:
        print(f"{name}: {capture_pair(name, base, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
