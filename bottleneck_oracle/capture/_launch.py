"""Run one process per rank until all exit; a failing rank stops the others and is reported in one line.

Kept apart from the job it launches (`_gpt`) because it needs no torch and is tested on its own.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from bottleneck_oracle.errors import CaptureError

__all__ = ["free_port", "launch"]

logger = logging.getLogger(__name__)

_POLL_S = 0.02


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _failure(failed: list[int], processes: list[subprocess.Popen[bytes]], log_dir: Path) -> str:
    """One line: the failed rank whose log stopped first (the first to fail) and its last output line."""
    rank = min(failed, key=lambda r: (log_dir / f"rank{r}.log").stat().st_mtime_ns)
    log = (log_dir / f"rank{rank}.log").read_text(errors="replace")
    logger.debug("capture rank %d failed; its output:\n%s", rank, log[-20000:])
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    code = processes[rank].returncode
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    detail = f": {lines[-1][:300]}" if lines else ""
    return f"capture failed on rank {rank} ({how}){detail}"


def _wait(processes: list[subprocess.Popen[bytes]], timeout_s: float, log_dir: Path) -> None:
    deadline = time.monotonic() + timeout_s
    running = set(range(len(processes)))
    while running:
        finished = {rank for rank in running if processes[rank].poll() is not None}
        failed = sorted(rank for rank in finished if processes[rank].returncode != 0)
        if failed:
            raise CaptureError(_failure(failed, processes, log_dir))
        running -= finished
        if running and time.monotonic() > deadline:
            still = sorted(running)
            raise CaptureError(f"capture timed out after {timeout_s:g} s; ranks {still} still running")
        time.sleep(_POLL_S)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def launch(commands: Sequence[Sequence[str]], timeout_s: float, log_dir: Path) -> None:
    """Run one process per rank (command i is rank i) until all exit, logging to `log_dir/rank{i}.log`.

    Raises:
        CaptureError: a rank exited non-zero (with the last line it wrote, normally the
            exception) or time ran out; the other ranks are stopped first.
    """
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for rank, command in enumerate(commands):
            with (log_dir / f"rank{rank}.log").open("wb") as log:
                processes.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log))
        _wait(processes, timeout_s, log_dir)
    finally:
        _stop(processes)
