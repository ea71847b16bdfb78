"""Where per-rank work runs: in this machine's processes (``local``) or as Ray tasks on a cluster (``ray``).

An executor maps one function over items (rank files) and gives the results back in order. Both give
the same results bit for bit: the function is the same, only where it runs differs. Ray is joined at
``ray_address`` (a running cluster) or started on this machine with its cores; a task whose worker dies
is run again (``RAY_TASK_RETRIES``), and a task's own error (a bad rank file) is raised here as itself.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from bottleneck_oracle.errors import ConfigError, SetupError, one_line

if TYPE_CHECKING:
    from bottleneck_oracle.config import Settings

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "RayExecutor", "TaskStats", "executor_of", "make_executor"]

log = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
RAY_TASK_RETRIES = 3  # a task whose worker process or node died runs again this many times
_CONNECT_TIMEOUT_S = 5.0
_MIN_WINDOW = 8  # Ray tasks in flight at least, however few the cluster's CPUs
T = TypeVar("T")
R = TypeVar("R")


@dataclass(slots=True)
class TaskStats:
    """What the last ``map`` cost where it ran: one entry per item, in order."""

    peak_rss_bytes: list[int] = field(default_factory=list)  # peak RSS of the process running each item (no shared memory)
    node: list[str] = field(default_factory=list)  # where each item ran: its Ray node's id ("" in a local process)


class Executor(Protocol):
    """Maps a picklable module-level function over items, results in the items' order.

    With ``shared``, each call is ``fn(shared, item)``: one object every task reads (sent once, not per
    item: forked into local processes, put once in Ray's object store). ``done(i)`` is called in this
    process as item ``i`` finishes, in the order they finish. ``near`` names, per item, the node it should run on
    when it can (``TaskStats.node`` of an earlier map: where that item's files were left); None: anywhere."""

    stats: TaskStats

    def map(self, fn: Callable[..., R], items: Sequence[T], shared: Any = None,
            done: Callable[[int], None] | None = None, near: Sequence[str] | None = None) -> list[R]: ...


_SHARED: Any = None  # ``shared`` of the local executor's map, inherited by its forked processes


def _measured(fn: Callable[..., R], item: T, own_process: bool = True, shared: Any = None,
              in_ray: bool = False) -> tuple[R, int, str]:
    """``fn(item)`` (``fn(shared, item)`` with ``shared``), with the peak RSS of the process while it ran and,
    ``in_ray``, the Ray node it ran on (else ""). A Ray worker runs task after task: its peak is reset before
    each one (Linux), so that it is this task's alone; in the caller's own process (``own_process`` false) it
    is left alone, and is the caller's peak so far."""
    if own_process:
        _reset_peak_rss()
    result = fn(item) if shared is None else fn(shared, item)
    return result, _peak_rss(), _ray().get_runtime_context().get_node_id() if in_ray else ""


def _collect(results: Iterable[tuple[R, int, str]], done: Callable[[int], None] | None) -> list[tuple[R, int, str]]:
    out = []
    for i, result in enumerate(results):
        out.append(result)
        if done is not None:
            done(i)
    return out


def _measured_forked(fn: Callable[..., R], item: T) -> tuple[R, int, str]:
    return _measured(fn, item, True, _SHARED)


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass  # not Linux: the process's peak so far


def _peak_rss() -> int:
    """The process's peak RSS, less the shared memory it holds: a Ray worker maps the object store, where
    the results of its earlier tasks lie, and that is the store's memory, not the task's."""
    try:
        with open("/proc/self/status") as f:
            kb = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in f) if k in ("VmHWM", "RssShmem")}
        return (kb["VmHWM"] - kb.get("RssShmem", 0)) * 1024
    except (OSError, KeyError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class LocalExecutor:
    """``workers`` forked processes on this machine (one: in this process)."""

    workers: int = 1
    stats: TaskStats = field(default_factory=TaskStats)

    def map(self, fn: Callable[..., R], items: Sequence[T], shared: Any = None,
            done: Callable[[int], None] | None = None, near: Sequence[str] | None = None) -> list[R]:
        global _SHARED
        if self.workers <= 1 or len(items) <= 1:
            out = _collect((_measured(fn, item, False, shared) for item in items), done)
        else:
            _SHARED = shared  # set before the fork: the processes inherit it, nothing is pickled
            try:
                context = multiprocessing.get_context("fork")
                with ProcessPoolExecutor(max_workers=min(self.workers, len(items)), mp_context=context) as pool:
                    out = _collect(pool.map(_measured_forked, [fn] * len(items), items), done)
            finally:
                _SHARED = None
        self.stats = TaskStats([rss for _, rss, _ in out], [node for _, _, node in out])
        return [r for r, _, _ in out]


@dataclass
class RayExecutor:
    """Ray tasks, one per item, on the cluster at ``address`` or on a Ray started here with ``num_cpus``.

    The files the tasks read must be reachable at the same paths from every node (a shared or
    replicated folder), and the nodes must run this package at the driver's version (``docs/scale.md``).
    """

    address: str | None = None
    num_cpus: int | None = None
    stats: TaskStats = field(default_factory=TaskStats)

    def map(self, fn: Callable[..., R], items: Sequence[T], shared: Any = None,
            done: Callable[[int], None] | None = None, near: Sequence[str] | None = None) -> list[R]:
        ray = _ray()
        self._connect(ray)
        task = ray.remote(max_retries=RAY_TASK_RETRIES, retry_exceptions=False)(_measured)
        shared_ref = None if shared is None else ray.put(shared)  # once: a task maps its arrays, no copy
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        on = lambda node: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True)) if node else task  # noqa: E731
        position: dict[Any, int] = {}

        def submit(i: int) -> Any:
            ref = on(near[i] if near else "").remote(fn, items[i], True, shared_ref, True)
            position[ref] = i
            return ref
        # a window of tasks in flight, twice the cluster's CPUs: the object store holds their items only, not
        # every item at once (a scan's last round sends each rank its steps' paths)
        window = max(_MIN_WINDOW, 2 * int(ray.cluster_resources().get("CPU", 1)))
        out: list[Any] = [None] * len(items)
        try:
            pending = [submit(i) for i in range(min(window, len(items)))]
            queued = len(pending)
            while pending:
                finished, pending = ray.wait(pending, num_returns=1)
                for ref in finished:
                    i = position.pop(ref)
                    out[i] = ray.get(ref)
                    if done is not None:
                        done(i)
                    if queued < len(items):
                        pending.append(submit(queued))
                        queued += 1
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else None
            if cause is None:
                raise
            raise cause from None  # the task's own error (a bad file): as the local executor raises it
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError) as e:
            # a rank file too large for its node's memory ends here too (the memory monitor kills the task)
            raise SetupError(f"ray: a task failed {RAY_TASK_RETRIES + 1} times, its worker dying each time "
                             f"({type(e).__name__}); see the cluster's logs") from None
        self.stats = TaskStats([rss for _, rss, _ in out], [node for _, _, node in out])
        return [r for r, _, _ in out]

    def _connect(self, ray: Any) -> None:
        if ray.is_initialized():
            return
        quiet = {"log_to_driver": False, "logging_level": logging.WARNING, "configure_logging": False}
        if self.address:
            _check_reachable(self.address)
            try:
                ray.init(address=self.address, **quiet)
            except ConnectionError as e:  # answered, but refused us: a token that is not the cluster's, most often
                raise ConfigError(f"ray address {self.address}: the cluster refused this client ({one_line(e)}); "
                                  "with token authentication, set RAY_AUTH_MODE=token and the cluster's "
                                  "RAY_AUTH_TOKEN here too") from None
        else:
            # "local": a Ray of its own, never one a `ray start` left on this machine
            ray.init(address="local", num_cpus=self.num_cpus or os.cpu_count() or 1, include_dashboard=False, **quiet)
            atexit.register(ray.shutdown)  # the Ray this command started ends with it


def _ray() -> Any:
    try:
        import ray  # optional: only the ray executor needs it
    except ImportError:
        raise SetupError("executor ray: the 'ray' package is not installed (pip install 'bottleneck-oracle[ray]', "
                         "or `make setup`)") from None
    return ray


def _check_reachable(address: str) -> None:
    """Fails in seconds, with the address, where ``ray.init`` would wait minutes for a cluster that is not there."""
    if address == "auto" or address.startswith("ray://"):
        return  # 'auto' finds a local cluster by its files; ray:// is Ray Client, which checks on its own
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"ray address {address!r}: not HOST:PORT (the head node's GCS port, 6379 by default)")
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise ConfigError(f"ray address {address}: no Ray head node answers there ({e.strerror or e})") from None


def make_executor(kind: str, *, workers: int = 1, ray_address: str | None = None) -> Executor:
    """The executor named ``kind`` (``local`` or ``ray``).

    Args:
        workers (int): local processes; with ``ray`` and no address, the CPUs of the Ray started here.
        ray_address (str | None): a running Ray cluster's head (``HOST:PORT``, ``auto``, ``ray://...``).

    Raises:
        ConfigError: an unknown executor, or an address given to the local one.
    """
    if kind == "local":
        if ray_address:
            raise ConfigError(f"ray address {ray_address}: given, but the executor is local (add --executor ray)")
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(ray_address or None, None if ray_address else workers)
    raise ConfigError(f"executor {kind!r}: unknown; one of {', '.join(EXECUTORS)}")


def executor_of(settings: Settings, workers: int | None = None) -> Executor:
    """The executor ``settings`` name (``ORACLE_EXECUTOR``, ``RAY_ADDRESS`` or the command's flags)."""
    return make_executor(settings.executor, workers=workers or settings.workers, ray_address=settings.ray_address)
