"""The job behind `capture`: a small GPT, its random-token dataset, one rank's profiled loop, `run_job`.

Kept together because they are one job and all need torch; imported only by `capture()` and by
the rank processes `run_job` starts (`python -c ... main(RANK, JOB_FILE)`), never by analysis code.
A rank trains with DDP, or holds one pipeline stage (`_pipeline`); `StepProfiler` records it.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import record_function
from torch.utils.data import DataLoader, Dataset

from bottleneck_oracle.capture._launch import free_port, launch
from bottleneck_oracle.capture._pipeline import Layout, PipelineStep
from bottleneck_oracle.capture.instrument import StepProfiler, StepSchedule

if TYPE_CHECKING:
    from bottleneck_oracle.capture.config import CaptureConfig

__all__ = ["GPT", "TORCH_VERSION", "RandomTokens", "RankResult", "exit_now", "launch", "main", "run_job", "run_rank"]

logger = logging.getLogger(__name__)

Batch = tuple[torch.Tensor, torch.Tensor]
# (tokens, targets, injected actions) -> CPU ms of forward and backward
ForwardBackward = Callable[[torch.Tensor, torch.Tensor, dict[str, float]], float]
TORCH_VERSION = str(torch.__version__)
_MB = 1 << 20
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
# A rank process: put this checkout first on sys.path (pytest or a script may have found the
# package through a path the child would not inherit), then run `main(RANK, JOB_FILE)`.
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from bottleneck_oracle.capture._gpt import main; main(sys.argv[2:])"
)
_FLOAT32_BYTES = 4
TRACE_NAME = "rank{rank}"  # + `.pt.trace.json.gz` and `.et.json.gz`


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through `scaled_dot_product_attention`."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        shape = (batch, seq, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, seq, width))


class MLP(nn.Module):
    """Two-layer GELU MLP; `repeat` > 1 runs its matmuls that many times (same result)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor, repeat: int = 1) -> torch.Tensor:
        total = self.proj(F.gelu(self.fc(x)))
        for _ in range(repeat - 1):
            total = total + self.proj(F.gelu(self.fc(x)))
        return total / repeat if repeat > 1 else total


class Block(nn.Module):
    """Pre-norm decoder block: attention then MLP, each with a residual."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x: torch.Tensor, mlp_repeat: int = 1) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x), mlp_repeat)


class GPT(nn.Module):
    """A small GPT-style decoder that returns the next-token cross-entropy loss.

    Args:
        vocab (int): vocabulary size.
        seq_len (int): longest sequence (size of the learned position table).
        d_model (int): model width.
        heads (int): attention heads; must divide `d_model`.
        layers (int): decoder blocks.

    Shapes:
        tokens, targets: int64[batch, seq]; returns a scalar loss.
    """

    def __init__(self, vocab: int, seq_len: int, d_model: int, heads: int, layers: int) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor, mlp_repeat: int = 1) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        for block in self.blocks:
            x = block(x, mlp_repeat)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class RandomTokens(Dataset[Batch]):
    """Seeded random token sequences; item i is (tokens, next tokens).

    Args:
        count (int): number of sequences.
        seq_len (int): tokens per sequence.
        vocab (int): tokens are drawn uniformly from [0, vocab).
        seed (int): generator seed.
        stall_s (dict[int, float]): item index -> seconds `__getitem__` sleeps first.
    """

    def __init__(self, count: int, seq_len: int, vocab: int, seed: int, stall_s: dict[int, float]) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.data = torch.randint(vocab, (count, seq_len + 1), generator=generator)
        self.stall_s = stall_s

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, index: int) -> Batch:
        if index in self.stall_s:
            time.sleep(self.stall_s[index])
        row = self.data[index]
        return row[:-1], row[1:]


def _plan(rank: int, config: CaptureConfig) -> dict[int, dict[str, float]]:
    """Step -> {category: size} of the injections this rank applies."""
    plan: dict[int, dict[str, float]] = {}
    for injection in config.resolved_injections():
        if rank in injection.ranks:
            assert injection.size is not None  # resolved
            plan.setdefault(injection.step, {})[injection.category] = injection.size
    return plan


def _all_reduce_ms(megabytes: float) -> float:
    """Run one synchronous all-reduce of `megabytes` of float32 and return its milliseconds. The payload
    is not filled: filling 128 MB took longer than the all-reduce on a loaded machine, host work a job
    without the injection does not have."""
    payload = torch.empty(max(1, int(megabytes * _MB) // _FLOAT32_BYTES))
    start = time.perf_counter()
    dist.all_reduce(payload)
    return (time.perf_counter() - start) * 1e3


def _save_checkpoint_ms(
    model: nn.Module, optimizer: torch.optim.Optimizer, megabytes: float, path: Path
) -> float:
    """Save model and optimizer state padded to about `megabytes`, fsync it, return milliseconds."""
    start = time.perf_counter()
    with record_function("checkpoint_save"):
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        state["padding"] = torch.zeros(max(1, int(megabytes * _MB) // _FLOAT32_BYTES))
        with path.open("wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
    return (time.perf_counter() - start) * 1e3


def _ddp_forward_backward(
    model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor, actions: dict[str, float]
) -> float:
    """Forward and backward of the whole model, pausing between them if injected; CPU ms spent."""
    start = time.thread_time()  # CPU time: excludes the sleeps and the waits in the DDP all-reduce
    loss = model(tokens, targets, mlp_repeat=int(actions.get("slow_compute", 1)))
    forward_s = time.thread_time() - start
    if "host_pause" in actions:
        time.sleep(actions["host_pause"] / 1e3)
    start = time.thread_time()
    loss.backward()
    return (forward_s + time.thread_time() - start) * 1e3


def _step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterator[Batch],
    actions: dict[str, float],
    checkpoint_path: Path,
    forward_backward: ForwardBackward,
) -> dict[str, float]:
    """Run one training step with the injections in `actions`; return the measured ms."""
    measured: dict[str, float] = {}
    if "straggler_rank" in actions:
        time.sleep(actions["straggler_rank"] / 1e3)
    tokens, targets = next(batches)
    measured["compute"] = forward_backward(tokens, targets, actions)
    if "exposed_communication" in actions:
        measured["exposed_communication"] = _all_reduce_ms(actions["exposed_communication"])
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if "checkpoint_stall" in actions:
        module = model.module if isinstance(model, DistributedDataParallel) else model
        megabytes = actions["checkpoint_stall"]
        measured["checkpoint_stall"] = _save_checkpoint_ms(module, optimizer, megabytes, checkpoint_path)
    return measured


def _slow_compute_extra(plan: dict[int, dict[str, float]], measured: dict[int, dict[str, float]]) -> None:
    """Add, for steps with slow_compute, the compute CPU ms above the median of the other steps."""
    slow = {step for step, actions in plan.items() if "slow_compute" in actions}
    normal = [times["compute"] for step, times in measured.items() if step not in slow]
    baseline = statistics.median(normal) if normal else 0.0
    for step in slow & measured.keys():
        measured[step]["slow_compute"] = measured[step]["compute"] - baseline


def _loader(replica: int, config: CaptureConfig, plan: dict[int, dict[str, float]]) -> DataLoader[Batch]:
    """A sequential DataLoader over a replica's tokens; step s fetches items [s*B, (s+1)*B)."""
    stall_s = {
        step * config.batch_size: actions["dataloader_stall"] / 1e3
        for step, actions in plan.items()
        if "dataloader_stall" in actions
    }
    count = config.recorded_steps.stop * config.batch_size
    dataset = RandomTokens(count, config.seq_len, config.vocab, config.seed + replica, stall_s)
    return DataLoader(dataset, config.batch_size, shuffle=False, num_workers=config.num_workers)


def _parallelize(rank: int, config: CaptureConfig) -> tuple[nn.Module, ForwardBackward, int]:
    """This rank's model (DDP, or its pipeline stage), its forward+backward, and its data replica."""
    torch.manual_seed(config.seed)
    gpt = GPT(config.vocab, config.seq_len, config.d_model, config.heads, config.layers)
    if config.pipeline == 1:
        ddp = DistributedDataParallel(gpt)
        return ddp, partial(_ddp_forward_backward, ddp), rank
    layout = Layout(rank, config.pipeline, config.ranks // config.pipeline)
    stage = PipelineStep.build(gpt, layout, config.microbatches, config.stage_layers)
    return stage.model, stage, layout.replica


def _train(rank: int, config: CaptureConfig, out_dir: Path, work_dir: Path) -> dict[str, object]:
    """Build the model and data, run the profiled loop (which writes the traces), return timings."""
    model, forward_backward, replica = _parallelize(rank, config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    plan = _plan(rank, config)
    loader = _loader(replica, config, plan)
    first = config.recorded_steps.start
    wall_ms: dict[int, float] = {}
    measured: dict[int, dict[str, float]] = {}
    checkpoint_path = work_dir / f"checkpoint_rank{rank}.pt"
    steps = StepSchedule(wait=config.wait_steps, warmup=config.warmup_steps, active=config.steps)
    # The capture injects its faults itself (inside the step, with measured ground truth).
    profiler = StepProfiler(out_dir, schedule=steps, rank=rank, injections=(), name=TRACE_NAME,
                            execution_trace=config.execution_trace)
    with profiler:
        batches = iter(loader)
        for step in range(config.recorded_steps.stop):
            start = time.perf_counter()
            times = _step(model, optimizer, batches, plan.get(step, {}), checkpoint_path, forward_backward)
            if step >= first:
                wall_ms[step] = round((time.perf_counter() - start) * 1e3, 3)
                measured[step] = {what: round(ms, 3) for what, ms in times.items()}
            profiler.step()
    _slow_compute_extra(plan, measured)
    return {"step_wall_ms": wall_ms, "measured_ms": measured}


def run_rank(rank: int, config: CaptureConfig, init_method: str, out_dir: Path, work_dir: Path) -> None:
    """Run one rank of the job; write its trace and `work_dir/rank{r}.result.json`.

    Args:
        rank: this process's rank.
        config: the capture settings (validated).
        init_method: the `tcp://127.0.0.1:PORT` rendezvous address.
        out_dir: where the traces go (`rank{r}.pt.trace.json.gz`, maybe `rank{r}.et.json.gz`).
        work_dir: scratch folder for the result file and checkpoints.
    """
    if config.pin_cpus:  # before gloo starts its threads: they inherit the mask
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    timeout = timedelta(seconds=config.timeout_s)
    dist.init_process_group(
        "gloo", init_method=init_method, rank=rank, world_size=config.ranks, timeout=timeout
    )
    try:
        result = _train(rank, config, out_dir, work_dir)
    finally:
        dist.destroy_process_group()
    (work_dir / f"rank{rank}.result.json").write_text(json.dumps(result))


def main(argv: Sequence[str]) -> None:
    """Entry of a rank process: `RANK JOB_FILE`, the job that `run_job` pickled."""
    rank, job_path = int(argv[0]), Path(argv[1])
    config, init_method, out_dir = pickle.loads(job_path.read_bytes())
    run_rank(rank, config, init_method, Path(out_dir), job_path.parent)
    exit_now()


def exit_now() -> None:
    """Exit 0 without libtorch's exit-time destructors, once a rank's files are written.

    They race with the profiler's and gloo's threads and, about once in a hundred
    runs on a loaded machine, abort a rank that finished its work ("terminate called
    without an active exception") after ``destroy_process_group``.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@dataclass(frozen=True, slots=True)
class RankResult:
    """What one rank measured: step -> wall ms, and step -> {what: ms} (compute, injections)."""

    step_wall_ms: dict[int, float]
    measured_ms: dict[int, dict[str, float]]


def _read_result(work_dir: Path, rank: int) -> RankResult:
    data = json.loads((work_dir / f"rank{rank}.result.json").read_text())
    return RankResult(
        step_wall_ms={int(step): float(ms) for step, ms in data["step_wall_ms"].items()},
        measured_ms={int(step): dict(times) for step, times in data["measured_ms"].items()},
    )


def run_job(config: CaptureConfig, out_dir: Path) -> list[RankResult]:
    """Run the job on `config.ranks` processes and return what each rank measured.

    Args:
        config: the capture settings (validated).
        out_dir: absolute folder for the traces.

    Raises:
        CaptureError: a rank failed or the job ran past `config.timeout_s`.
    """
    with tempfile.TemporaryDirectory(prefix="oracle-capture-") as scratch:
        work_dir = Path(scratch)
        job = work_dir / "job.pickle"
        job.write_bytes(pickle.dumps((config, f"tcp://127.0.0.1:{free_port()}", str(out_dir))))
        command = [sys.executable, "-c", _BOOTSTRAP, _PACKAGE_ROOT]
        launch([[*command, str(rank), str(job)] for rank in range(config.ranks)], config.timeout_s, work_dir)
        return [_read_result(work_dir, rank) for rank in range(config.ranks)]
