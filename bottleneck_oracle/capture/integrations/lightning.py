"""A ``lightning.pytorch.Callback`` that records a Lightning ``Trainer`` run with ``StepProfiler``.

Needs ``lightning`` (the ``integrations`` extra); importing this module without it raises an
``ImportError`` that says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Unpack

try:
    from lightning.pytorch import Callback, LightningModule, Trainer
except ImportError as error:  # the optional dependency, imported only with this module
    raise ImportError(
        "bottleneck_oracle.capture.integrations.lightning needs lightning: "
        "pip install 'bottleneck-oracle[integrations]'"
    ) from error

from bottleneck_oracle.capture.instrument import ProfilerOptions, StepProfiler

__all__ = ["ProfilerCallback"]


class ProfilerCallback(Callback):  # type: ignore[misc]
    """Records a Lightning ``Trainer`` run: one ``ProfilerStep`` per training batch.

    Starts a ``StepProfiler`` at ``on_train_start``, steps it at ``on_train_batch_end`` and stops
    it at ``on_train_end`` (or when training raises); the arguments are ``StepProfiler``'s and
    are checked here. With ``accumulate_grad_batches`` > 1 a step is one batch, not one optimizer
    step. The rank is torch.distributed's under a distributed strategy. Injected
    ``dataloader_stall`` needs a wrapped loader and so does not apply to a Trainer.

    Example:
        ```python
        trainer = Trainer(max_steps=100, callbacks=[ProfilerCallback("traces/")])
        trainer.fit(model, loader)
        ```

    Args:
        out_dir (Path): folder for the traces.
        **options: ``StepProfiler``'s keyword arguments (``schedule``, ``rank``, ``injections``,
            ``execution_trace``, ``name``, ``settings``).

    Raises:
        ConfigError: as ``StepProfiler``.
    """

    def __init__(self, out_dir: Path | str, **options: Unpack[ProfilerOptions]) -> None:
        self.profiler = StepProfiler(out_dir, **options)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Start recording: step 0 begins."""
        self.profiler.start()

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """End the batch that just ran and begin the next step."""
        self.profiler.step()

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Stop recording; a window still open is written."""
        self.profiler.stop()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        """Stop recording when training fails, writing what was recorded."""
        self.profiler.stop()
