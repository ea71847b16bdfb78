"""Record a training loop the way the analysis needs it: ``profile_training`` and ``StepProfiler``.

A ``StepProfiler`` wraps ``torch.profiler.profile`` with a step schedule (so every iteration is a
``ProfilerStep#N``), tensor shapes, CUDA activity and sync events where CUDA is present, and a
PyTorch execution trace over the same recorded steps. Each recorded window becomes
``rank{r}.steps{a}-{b}.pt.trace.json.gz`` and ``rank{r}.steps{a}-{b}.et.json.gz``, which
``read_trace(out_dir)`` reads and links. For experiments it injects delays at given steps and
ranks. ``StepSchedule``, the record of when to record, lives here because only the profiler uses it.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, TypeVar, Unpack

import torch
import torch.distributed as dist
from torch import profiler as torch_profiler
from torch.profiler import ProfilerActivity, record_function

from bottleneck_oracle.capture._et_window import ExecutionTraceWindow
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.injection import DEFAULT_SIZES, Injection, parse_injection
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = [
    "DEFAULT_NAME",
    "ET_SUFFIX",
    "INJECTABLE",
    "KINETO_SUFFIX",
    "LOAD_ANNOTATION",
    "ProfilerOptions",
    "StepProfiler",
    "StepSchedule",
    "profile_training",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_NAME = "rank{rank}.steps{first}-{last}"
KINETO_SUFFIX = ".pt.trace.json.gz"
ET_SUFFIX = ".et.json.gz"
LOAD_ANNOTATION = "## load_batch ##"
CHECKPOINT_ANNOTATION = "checkpoint_save"
INJECTABLE = (  # the sleep-type faults a profiler can inject into any loop
    Bottleneck.HOST_PAUSE.value, Bottleneck.STRAGGLER_RANK.value,
    Bottleneck.DATALOADER_STALL.value, Bottleneck.CHECKPOINT_STALL.value,
)
_MB = 1 << 20
_FLOAT32_BYTES = 4


@dataclass(frozen=True, slots=True)
class StepSchedule:
    """When to record: ``repeat`` cycles of ``wait`` idle, ``warmup`` and ``active`` recorded steps.

    Args:
        wait (int): steps of each cycle with the profiler off. (default: ``1``)
        warmup (int): steps profiled but discarded, so recording starts warm. (default: ``1``)
        active (int): recorded steps of each cycle, one trace file per cycle. (default: ``3``)
        repeat (int): cycles; at least 1, so the overhead ends with them. (default: ``1``)
    """

    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1

    def __post_init__(self) -> None:
        if self.wait < 0 or self.warmup < 0 or self.active < 1 or self.repeat < 1:
            raise ConfigError(f"{self}: need wait >= 0, warmup >= 0, active >= 1 and repeat >= 1")

    @property
    def cycle(self) -> int:
        """Steps in one cycle."""
        return self.wait + self.warmup + self.active

    def windows(self) -> tuple[range, ...]:
        """The ``ProfilerStep#N`` numbers recorded, one range per cycle (and per trace file)."""
        return tuple(self.window_of(c * self.cycle) for c in range(self.repeat))

    def window_of(self, step: int) -> range:
        """The recorded steps of the cycle that holds ``step``."""
        first = step - step % self.cycle + self.wait + self.warmup
        return range(first, first + self.active)


def _cuda_sync_config() -> Any:
    """``_ExperimentalConfig(enable_cuda_sync_events=True)``, or None where this torch lacks it."""
    factory = getattr(getattr(torch._C, "_profiler", None), "_ExperimentalConfig", None)
    if factory is None:
        logger.warning("torch %s has no _ExperimentalConfig: no CUDA sync events", torch.__version__)
        return None
    try:
        return factory(enable_cuda_sync_events=True)
    except TypeError:
        logger.warning("torch %s cannot record CUDA sync events: stream waits will be inferred",
                       torch.__version__)
        return None


def _activities() -> tuple[list[ProfilerActivity], Any]:
    """CPU, plus CUDA with its sync events when a GPU is usable."""
    if not torch.cuda.is_available():
        return [ProfilerActivity.CPU], None
    return [ProfilerActivity.CPU, ProfilerActivity.CUDA], _cuda_sync_config()


def _resolve_rank(rank: int | None) -> int:
    if rank is not None:
        return rank
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def _resolve_injections(
    injections: Sequence[Injection | str] | None, settings: Settings | None, steps: StepSchedule
) -> tuple[Injection, ...]:
    """Parse and check the injections (``settings.injections``, else ``$ORACLE_INJECT``, when None)."""
    if injections is None:
        injections = (settings or Settings.from_env()).injections
    parsed = tuple(parse_injection(i, INJECTABLE) if isinstance(i, str) else i for i in injections)
    recorded = steps.windows()
    for injection in parsed:
        if injection.category not in INJECTABLE:
            raise ConfigError(f"injection {injection}: a profiler cannot inject {injection.category}; "
                              f"use one of {', '.join(INJECTABLE)}")
        if not any(injection.step in window for window in recorded):
            shown = ", ".join(f"#{w.start} to #{w.stop - 1}" for w in recorded)
            raise ConfigError(f"injection {injection}: step {injection.step} is not recorded; "
                              f"ProfilerStep{shown} are")
    keys = [(i.category, i.step, i.ranks) for i in parsed]
    if len(set(keys)) != len(keys):
        raise ConfigError("injections: two of one category hit the same step and ranks")
    return parsed


def _check_name(name: str, steps: StepSchedule) -> None:
    try:
        name.format(rank=0, first=0, last=0)
    except (KeyError, IndexError, ValueError) as error:
        raise ConfigError(f"trace name {name!r}: only {{rank}}, {{first}} and {{last}} may be used") from error
    if steps.repeat > 1 and "{first}" not in name:
        raise ConfigError(f"trace name {name!r}: with repeat > 1 it needs {{first}}, one file per window")
    if "/" in name or os.sep in name:
        raise ConfigError(f"trace name {name!r}: a file name, not a path")


def _save_checkpoint(out_dir: Path, megabytes: float) -> None:
    """Serialize about ``megabytes`` of float32 into an anonymous file beside the traces, fsynced."""
    with record_function(CHECKPOINT_ANNOTATION), tempfile.TemporaryFile(dir=out_dir) as file:
        torch.save(torch.zeros(max(1, int(megabytes * _MB) // _FLOAT32_BYTES)), file)
        file.flush()
        os.fsync(file.fileno())


class StepProfiler:
    """Profiles a training loop step by step and writes one Kineto trace and one ET per window.

    ``start()`` before the first step, ``step()`` after each, ``stop()`` after the loop (or use it
    as a context manager). The profiler is on only in each window's warmup and active steps, and
    the execution trace only in its active ones; other steps cost one ``record_function`` each.
    Files are named by ``name`` plus ``.pt.trace.json.gz`` and ``.et.json.gz``. A window cut short
    by ``stop()`` is written too: it is named through the last step ``step()`` ended and holds one
    more, partial ``ProfilerStep``.

    Injections, for experiments, run on the ranks they name (all when none): ``straggler_rank``
    sleeps at the start of its step, ``host_pause`` at its end, ``checkpoint_stall`` saves its
    size in MB beside the traces at its end (under a ``checkpoint_save`` annotation), and
    ``dataloader_stall`` sleeps in the step's first fetch from a loader passed through
    ``wrap_loader``. Sizes default to ``truth.injection.DEFAULT_SIZES``.

    Example:
        ```python
        profiler = StepProfiler("traces/", schedule=StepSchedule(wait=5, warmup=1, active=3))
        profiler.start()
        for batch in profiler.wrap_loader(loader):
            train_step(batch)
            profiler.step()
        profiler.stop()
        ```

    Args:
        out_dir (Path): folder for the traces; created on ``start()``.
        schedule (StepSchedule | None): when to record. (default: ``StepSchedule()``)
        rank (int | None): rank in the file names. (default: torch.distributed's rank when it
            is initialised at ``start()``, else 0)
        injections (Sequence[Injection | str] | None): faults to inject, as records or
            ``CATEGORY@STEP[:RANK,...][=SIZE]`` texts, at recorded steps only. (default:
            ``settings.injections``, that is ``$ORACLE_INJECT``; pass ``()`` for none)
        execution_trace (bool): also record a PyTorch execution trace. (default: ``True``)
        name (str): file name without suffix; ``{rank}``, ``{first}``, ``{last}`` are the rank and
            the window's first and last step. (default: ``rank{rank}.steps{first}-{last}``)
        settings (Settings | None): where ``injections`` come from when None. (default: from
            the environment)

    Raises:
        ConfigError: a bad schedule or name, or an injection a profiler cannot run, of a step
            that is not recorded, or given twice.
    """

    def __init__(
        self,
        out_dir: Path | str,
        *,
        schedule: StepSchedule | None = None,
        rank: int | None = None,
        injections: Sequence[Injection | str] | None = None,
        execution_trace: bool = True,
        name: str = DEFAULT_NAME,
        settings: Settings | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.schedule = schedule or StepSchedule()
        self.execution_trace = execution_trace
        self.name = name
        _check_name(name, self.schedule)
        self._injections = _resolve_injections(injections, settings, self.schedule)
        self._rank_given = rank
        self._rank: int | None = None
        self._step = -1
        self._profiler: torch_profiler.profile | None = None
        self._et: ExecutionTraceWindow | None = None
        self._stopping = False
        self._plan: dict[int, dict[str, float]] = {}
        self._applied: list[Injection] = []
        self._files: list[Path] = []

    @property
    def rank(self) -> int | None:
        """The rank the files are named by; None before ``start()``."""
        return self._rank

    @property
    def step_num(self) -> int:
        """The N of the ``ProfilerStep#N`` running now (-1 before ``start()``)."""
        return self._step

    @property
    def injections(self) -> tuple[Injection, ...]:
        """The injections as given, checked."""
        return self._injections

    @property
    def applied(self) -> tuple[Injection, ...]:
        """The injections run so far on this rank, each with this rank and its size in ms or MB."""
        return tuple(self._applied)

    @property
    def files(self) -> tuple[Path, ...]:
        """The trace files written so far, Kineto and execution traces, in writing order."""
        return tuple(self._files)

    def start(self) -> StepProfiler:
        """Start step 0 under the profiler's schedule.

        Raises:
            RuntimeError: the profiler is already running.
        """
        if self._profiler is not None:
            raise RuntimeError(f"StepProfiler({self.out_dir}) is already running")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._rank = _resolve_rank(self._rank_given)
        self._plan = self._plan_for(self._rank)
        activities, experimental = _activities()
        partial = self.out_dir / f".rank{self._rank}.et.partial"
        self._et = ExecutionTraceWindow(partial) if self.execution_trace else None
        s = self.schedule
        self._profiler = torch_profiler.profile(
            activities=activities, record_shapes=True, experimental_config=experimental,
            schedule=torch_profiler.schedule(wait=s.wait, warmup=s.warmup, active=s.active, repeat=s.repeat),
            on_trace_ready=self._save_window, execution_trace_observer=self._et,
        )
        self._step = 0
        self._profiler.start()
        self._run(Bottleneck.STRAGGLER_RANK)  # injections at a step's start
        return self

    def step(self) -> None:
        """End the current step and start the next.

        Raises:
            RuntimeError: the profiler is not running.
        """
        if self._profiler is None:
            raise RuntimeError(f"StepProfiler({self.out_dir}) is not running; call start() first")
        self._end_step()
        self._step += 1
        self._profiler.step()
        self._run(Bottleneck.STRAGGLER_RANK)

    def stop(self) -> None:
        """Stop profiling and write the window in progress, if any; a no-op when not running."""
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        self._stopping = True
        try:
            profiler.stop()
        finally:
            self._stopping = False
            if self._et is not None:
                self._et.cleanup()

    def wrap_loader(self, loader: Iterable[T]) -> Iterator[T]:
        """Yield ``loader``'s batches, each fetch under ``## load_batch ##``, stalled where injected."""
        batches = iter(loader)
        while True:
            with record_function(LOAD_ANNOTATION):
                self._run(Bottleneck.DATALOADER_STALL)
                try:
                    batch = next(batches)
                except StopIteration:
                    return
            yield batch

    def __enter__(self) -> StepProfiler:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _plan_for(self, rank: int) -> dict[int, dict[str, float]]:
        plan: dict[int, dict[str, float]] = {}
        for injection in self._injections:
            if not injection.ranks or rank in injection.ranks:
                size = injection.size or DEFAULT_SIZES[Bottleneck(injection.category)]
                plan.setdefault(injection.step, {})[injection.category] = size
        return plan

    def _run(self, category: Bottleneck) -> None:
        """Run the injection of ``category`` planned for the current step, once."""
        size = self._plan.get(self._step, {}).pop(category.value, None)
        if size is None:
            return
        if category is Bottleneck.CHECKPOINT_STALL:
            _save_checkpoint(self.out_dir, size)
        else:
            time.sleep(size / 1e3)
        self._applied.append(Injection(category.value, self._step, (self._rank or 0,), size))

    def _end_step(self) -> None:
        """The injections at a step's end."""
        self._run(Bottleneck.CHECKPOINT_STALL)
        self._run(Bottleneck.HOST_PAUSE)

    def _save_window(self, profiler: torch_profiler.profile) -> None:
        """``on_trace_ready``: write the window that just ended, named by its steps."""
        ending = profiler.step_num if self._stopping else profiler.step_num - 1
        window = self.schedule.window_of(ending)
        last = max(window.start, profiler.step_num - 1)
        stem = self.name.format(rank=self._rank, first=window.start, last=last)
        kineto = self.out_dir / (stem + KINETO_SUFFIX)
        profiler.export_chrome_trace(str(kineto))
        self._files.append(kineto)
        if self._et is not None and self._et.save(self.out_dir / (stem + ET_SUFFIX)):
            self._files.append(self.out_dir / (stem + ET_SUFFIX))
        logger.info("rank %s: wrote steps %d-%d to %s", self._rank, window.start, last, kineto)


class ProfilerOptions(TypedDict, total=False):
    """``StepProfiler``'s keyword arguments (see its Args), for what builds one for the user."""

    schedule: StepSchedule | None
    rank: int | None
    injections: Sequence[Injection | str] | None
    execution_trace: bool
    name: str
    settings: Settings | None


def profile_training(out_dir: Path | str, **options: Unpack[ProfilerOptions]) -> StepProfiler:
    """A ``StepProfiler`` to use as a context manager around a training loop (see its arguments).

    Example:
        ```python
        with profile_training("traces/", schedule=StepSchedule(wait=5, active=3)) as rec:
            for batch in rec.wrap_loader(loader):
                train_step(batch)
                rec.step()
        read_trace("traces/")  # one Kineto trace and one execution trace per rank, linked
        ```

    Raises:
        ConfigError: as ``StepProfiler``.
    """
    return StepProfiler(out_dir, **options)
