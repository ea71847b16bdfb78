"""One PyTorch execution trace per recorded window, gzipped beside its Kineto trace.

``ExecutionTraceWindow`` is the ``execution_trace_observer`` that ``StepProfiler`` hands to
``torch.profiler.profile``: it registers a fresh ``ExecutionTraceObserver`` when a window starts
recording and finishes it when the window stops, so other steps pay nothing for it. The file is
kept as torch wrote it (schema 1.1 in torch 2.13); ``read_trace`` reads both layouts.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from torch.profiler import ExecutionTraceObserver

__all__ = ["ExecutionTraceWindow"]


class ExecutionTraceWindow:
    """The profiler's execution-trace observer: a fresh ``ExecutionTraceObserver`` per recorded window.

    ``torch.profiler.profile`` calls ``start()`` where a window starts recording and ``stop()``
    where it ends, before its ``on_trace_ready``, which then calls ``save()``.

    Args:
        scratch (Path): where the observer writes the window's plain JSON meanwhile.
    """

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self._observer: ExecutionTraceObserver | None = None

    def start(self) -> None:
        """Register and start an observer for the window that begins."""
        self._observer = ExecutionTraceObserver().register_callback(str(self.scratch))
        self._observer.start()

    def stop(self) -> None:
        """Stop the observer and finish its file."""
        if self._observer is not None:
            self._observer.unregister_callback()
            self._observer = None

    def cleanup(self) -> None:
        """Stop, and drop a file no window saved."""
        self.stop()
        self.scratch.unlink(missing_ok=True)

    def save(self, target: Path) -> bool:
        """Write the window just stopped to ``target`` (gzipped); False if none was recorded."""
        self.stop()
        if not self.scratch.exists():
            return False
        with open(self.scratch, "rb") as raw, gzip.open(target, "wb", compresslevel=6) as packed:
            shutil.copyfileobj(raw, packed)
        self.scratch.unlink()
        return True
