"""A small gloo job hung by one injected fault, with each rank's Flight Recorder dump: fixtures for `oracle hang`.

gloo never dumps on a hang, so each rank imitates NCCL's watchdog: a thread dumps once a deadline has passed
and ends the rank. ``python -m bottleneck_oracle.capture.hang_job --scenario skip --out DIR`` writes
``DIR/nccl_trace_rank_<rank>`` (the pickle a timeout dump writes) or, with ``--json``, ``<that>.json``.
With ``--profile`` the steps before the fault run under the profiler (``DIR/traces/rank<rank>.pt.trace.json.gz``),
and in ``sleep`` the faulty rank first pauses in the last of them: a rank slowing down before it stops.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from bottleneck_oracle.capture._launch import free_port
from bottleneck_oracle.capture.instrument import StepProfiler, StepSchedule
from bottleneck_oracle.errors import CaptureError, ConfigError

__all__ = ["DUMP_NAME", "SCENARIOS", "HangJob", "main", "rank_main", "run_hang_job"]

SCENARIOS = ("clean", "skip", "sleep", "exit", "size_mismatch", "subgroup", "p2p")
DUMP_NAME = "nccl_trace_rank_{rank}"  # NCCL's default TORCH_FR_DUMP_TEMP_FILE name, + ".json" in JSON form
_MICROBATCHES = 3  # per pipeline step
_DROPPED_MICROBATCH = 1  # `p2p`: the faulty stage never sends this one's activation
_FR_BUFFER_SIZE = "2000"  # entries kept; gloo records none unless TORCH_FR_BUFFER_SIZE is set before init
_WIDTH = 8  # the model is one [_WIDTH, _WIDTH] weight
_BATCH = 4
_HANG_S = 3600.0  # the `sleep` fault: far past any deadline
_GRACE_S = 1.0  # between a rank's dump and its exit, so that every rank dumps before a peer's exit breaks it
_GLOO_MARGIN_S = 60.0  # gloo's own timeout is the deadline plus this: it must not abort first
_START_S = 60.0  # allowance for starting the rank processes, on top of the deadline
_PAUSE_MS = 300  # `sleep --profile`: the faulty rank's host pause in the last profiled step
TRACES = "traces"  # --profile: the profiler traces' folder, inside the dumps' one
# A rank process: put this checkout first on sys.path (as _gpt does), then run `rank_main`.
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from bottleneck_oracle.capture.hang_job import rank_main; rank_main(sys.argv[2:])"
)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True, slots=True)
class HangJob:
    """One hung job: the scenario, its size, and where the fault hits.

    Attributes:
        scenario: one of `SCENARIOS`.
        ranks: processes (the world size).
        fault_rank: the rank that injects the fault (for `p2p`, the stage that drops a send).
        fault_step: the training step in which it does.
        steps: training steps each rank runs.
        deadline_s: seconds after `init_process_group` at which every rank dumps and exits.
        is_json: write the JSON form instead of the pickle.
        profile: record the steps before the fault with the profiler.
    """

    scenario: str
    ranks: int = 4
    fault_rank: int = 1
    fault_step: int = 1
    steps: int = 3
    deadline_s: float = 4.0
    is_json: bool = False
    profile: bool = False

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ConfigError(f"hang job: unknown scenario {self.scenario!r}; known: {', '.join(SCENARIOS)}")
        if self.ranks < 2 or (self.scenario == "subgroup" and (self.ranks < 4 or self.ranks % 2)):
            raise ConfigError(f"hang job: {self.ranks} ranks is too few for {self.scenario} (subgroup: an even 4+)")
        last = self.ranks - 2 if self.scenario == "p2p" else self.ranks - 1  # the last stage sends no activation
        if not 0 <= self.fault_rank <= last:
            raise ConfigError(f"hang job: fault rank {self.fault_rank} is not in [0, {last}] for {self.scenario}")
        if not 0 <= self.fault_step < self.steps:
            raise ConfigError(f"hang job: fault step {self.fault_step} is not in [0, {self.steps})")
        if self.profile and (self.scenario == "p2p" or self.fault_step < 1):
            raise ConfigError("hang job: --profile records the steps before the fault: a fault step of 1 or more, "
                              "and not p2p")
        if self.deadline_s <= 0:
            raise ConfigError(f"hang job: deadline {self.deadline_s} s must be positive")

    def is_faulty(self, rank: int, step: int) -> bool:
        """Whether `rank` injects the fault in `step` (never in `clean`)."""
        return self.scenario != "clean" and (rank, step) == (self.fault_rank, self.fault_step)

    def dump_path(self, out_dir: Path, rank: int) -> Path:
        """Where `rank` writes its dump."""
        return out_dir / (DUMP_NAME.format(rank=rank) + (".json" if self.is_json else ""))


def _dump(path: Path, is_json: bool) -> None:
    c10d = torch._C._distributed_c10d
    # (collectives, stack traces[, only active]): the same bytes a timeout dump writes
    path.write_bytes(c10d._dump_fr_trace_json(True, True) if is_json else c10d._dump_fr_trace(True, True, False))


def _exit(code: int) -> None:
    """End the process now, from any thread: the main thread may be blocked in a collective that never returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _watch(path: Path, is_json: bool, deadline_s: float, failed: threading.Event) -> None:
    time.sleep(deadline_s)
    _dump(path, is_json)
    time.sleep(_GRACE_S)
    _exit(1 if failed.is_set() else 0)


def _gradient(weight: torch.Tensor, step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and backward of one step on this rank's seeded batch: the weight's gradient and the loss."""
    batch = torch.randn(_BATCH, _WIDTH, generator=torch.Generator().manual_seed(1000 * step + rank))
    leaf = weight.detach().requires_grad_()
    loss = (batch @ leaf).square().mean()
    loss.backward()
    assert leaf.grad is not None
    return leaf.grad, loss.detach().reshape(1)


def _all_reduce_gradient(
    job: HangJob, rank: int, step: int, grad: torch.Tensor, group: dist.ProcessGroup | None
) -> None:
    """All-reduce a step's gradient over `group`, or inject this rank's fault in its place."""
    if job.is_faulty(rank, step):
        if job.scenario in ("skip", "subgroup"):
            return  # on to the next collective
        if job.scenario == "sleep":
            time.sleep(_HANG_S)  # the watchdog ends the rank first
        if job.scenario == "exit":
            _exit(1)  # dies without a dump
        if job.scenario == "size_mismatch":
            grad = grad.new_empty(0)  # an empty shard: gloo returns at once, with no message sent
    dist.all_reduce(grad, group=group)


def _train_data_parallel(job: HangJob, rank: int, group: dist.ProcessGroup | None, replicas: list[int],
                         out_dir: Path) -> None:
    """Sync the weight over the world, then train over `group`: all-reduce each step's gradient, broadcast
    the weight every second step, all-gather the losses at the end."""
    weight = torch.randn(_WIDTH, _WIDTH, generator=torch.Generator().manual_seed(0))
    dist.broadcast(weight, src=0)
    profiler = _profiler(job, out_dir)
    loss = torch.zeros(1)
    for step in range(job.steps):
        grad, loss = _gradient(weight, step, rank)
        _all_reduce_gradient(job, rank, step, grad, group)
        weight -= 0.1 * grad / len(replicas)
        if step % 2 == 1:
            dist.broadcast(weight, src=replicas[0], group=group)
        if profiler is not None and step < job.fault_step:
            profiler.step()  # the window is written when its last step ends
    dist.all_gather([torch.empty_like(loss) for _ in replicas], loss, group=group)


def _profiler(job: HangJob, out_dir: Path) -> StepProfiler | None:
    """With `job.profile`, a started profiler recording the steps before the fault, one file per rank."""
    if not job.profile:
        return None
    pause = [f"host_pause@{job.fault_step - 1}:{job.fault_rank}={_PAUSE_MS}"] if job.scenario == "sleep" else []
    schedule = StepSchedule(wait=0, warmup=0, active=job.fault_step)
    return StepProfiler(out_dir / TRACES, schedule=schedule, injections=pause, execution_trace=False,
                        name="rank{rank}").start()


def _train_pipeline(job: HangJob, rank: int) -> None:
    """Each rank a stage: per step, every microbatch forward (activations to the next stage), then every one
    backward (gradients to the previous), then the loss all-reduced over the world."""
    weight = torch.randn(_WIDTH, _WIDTH, generator=torch.Generator().manual_seed(rank))
    previous = rank - 1 if rank > 0 else None
    following = rank + 1 if rank < job.ranks - 1 else None
    for step in range(job.steps):
        loss = torch.zeros(1)
        for microbatch in range(_MICROBATCHES):
            x = torch.randn(_BATCH, _WIDTH, generator=torch.Generator().manual_seed(1000 * step + microbatch))
            if previous is not None:
                dist.recv(x, previous)
            y = x @ weight
            loss += y.square().mean()
            if following is not None and not (job.is_faulty(rank, step) and microbatch == _DROPPED_MICROBATCH):
                dist.send(y, following)
        for _ in range(_MICROBATCHES):
            grad = torch.ones(_BATCH, _WIDTH)
            if following is not None:
                dist.recv(grad, following)
            if previous is not None:
                dist.send(grad @ weight.T, previous)
        dist.all_reduce(loss)


def _train(job: HangJob, rank: int, out_dir: Path) -> None:
    if job.scenario == "p2p":
        _train_pipeline(job, rank)
        return
    if job.scenario != "subgroup":
        _train_data_parallel(job, rank, None, list(range(job.ranks)), out_dir)
        return
    pairs = [[first, first + 1] for first in range(0, job.ranks, 2)]
    groups = [dist.new_group(pair) for pair in pairs]  # every rank makes every group, in the same order
    _train_data_parallel(job, rank, groups[rank // 2], pairs[rank // 2], out_dir)


def _run_rank(job: HangJob, rank: int, init_method: str, out_dir: Path) -> None:
    """Run one rank until its watchdog dumps and ends the process, exiting 0; it never returns.

    gloo raises at once where a peer is gone (NCCL would block): the rank prints the error and waits
    for the deadline like a blocked NCCL rank, then exits 1. gloo has marked the failed collective
    completed by then. Errors once the deadline has passed come from peers exiting after their dumps.
    """
    os.environ["TORCH_FR_BUFFER_SIZE"] = _FR_BUFFER_SIZE  # read by init_process_group
    torch.set_num_threads(1)
    timeout = timedelta(seconds=job.deadline_s + _GLOO_MARGIN_S)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=job.ranks, timeout=timeout)
    start = time.monotonic()
    failed = threading.Event()
    watch = (job.dump_path(out_dir, rank), job.is_json, job.deadline_s, failed)
    threading.Thread(target=_watch, args=watch, daemon=True).start()
    try:
        _train(job, rank, out_dir)
    except RuntimeError:
        if time.monotonic() - start < job.deadline_s:
            traceback.print_exc()
            failed.set()
    threading.Event().wait()  # idle until the watchdog dumps and exits


def rank_main(argv: Sequence[str]) -> None:
    """Entry of a rank process: `RANK JOB_JSON INIT_METHOD OUT_DIR`."""
    rank, job, init_method, out_dir = int(argv[0]), HangJob(**json.loads(argv[1])), argv[2], Path(argv[3])
    _run_rank(job, rank, init_method, out_dir)


def _wait(processes: list[subprocess.Popen[bytes]], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    try:
        return [process.wait(timeout=max(0.0, deadline - time.monotonic())) for process in processes]
    except subprocess.TimeoutExpired as e:
        still = [rank for rank, process in enumerate(processes) if process.poll() is None]
        raise CaptureError(f"hang job: ranks {still} still running after {timeout_s:g} s") from e
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def run_hang_job(job: HangJob, out_dir: Path) -> list[int]:
    """Run `job` on `job.ranks` processes, replacing any dumps in `out_dir`; return each rank's exit code.

    Every rank dumps at the deadline and exits 0, or 1 where a collective failed before it; one that
    died (the `exit` fault, or gloo aborting on a size mismatch) has no dump.

    Raises:
        CaptureError: a rank was still running well past the deadline (it is killed).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in [*out_dir.glob(DUMP_NAME.format(rank="*")), *(out_dir / TRACES).glob("rank*.pt.trace.json*")]:
        stale.unlink()
    init_method = f"tcp://127.0.0.1:{free_port()}"
    command = [sys.executable, "-c", _BOOTSTRAP, _PACKAGE_ROOT]
    arguments = [json.dumps(asdict(job)), init_method, str(out_dir.resolve())]
    processes = [subprocess.Popen([*command, str(rank), *arguments], stdin=subprocess.DEVNULL)
                 for rank in range(job.ranks)]
    return _wait(processes, job.deadline_s + _GRACE_S + _START_S)


def _parse(argv: Sequence[str] | None) -> tuple[HangJob, Path]:
    parser = argparse.ArgumentParser(prog="python -m bottleneck_oracle.capture.hang_job", description=__doc__)
    parser.add_argument("--scenario", required=True, choices=SCENARIOS)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--out", type=Path, required=True, help="folder for the dumps")
    parser.add_argument("--json", action="store_true", help="write the JSON form (no stack frames)")
    parser.add_argument("--deadline", type=float, default=4.0, help="seconds until every rank dumps")
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help=f"profile the steps before the fault into OUT/{TRACES}")
    args = parser.parse_args(argv)
    job = HangJob(args.scenario, args.ranks, args.fault_rank, args.fault_step, args.steps, args.deadline, args.json,
                  args.profile)
    return job, args.out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job the flags describe and print each rank's exit code and dump; 2 on a bad flag or a stuck job."""
    try:
        job, out_dir = _parse(argv)
        codes = run_hang_job(job, out_dir)
    except (ConfigError, CaptureError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for rank, code in enumerate(codes):
        path = job.dump_path(out_dir, rank)
        print(f"rank {rank}: exit code {code}, dump {path if path.exists() else 'missing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
