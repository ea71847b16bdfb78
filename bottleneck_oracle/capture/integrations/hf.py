"""A Hugging Face ``transformers`` ``TrainerCallback`` that records a ``Trainer`` run with ``StepProfiler``.

Needs ``transformers`` (the ``integrations`` extra); importing this module without it raises an
``ImportError`` that says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Unpack

try:
    from transformers import (
        TrainerCallback,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )
except ImportError as error:  # the optional dependency, imported only with this module
    raise ImportError(
        "bottleneck_oracle.capture.integrations.hf needs transformers: "
        "pip install 'bottleneck-oracle[integrations]'"
    ) from error

from bottleneck_oracle.capture.instrument import ProfilerOptions, StepProfiler

__all__ = ["ProfilerCallback"]


class ProfilerCallback(TrainerCallback):  # type: ignore[misc]
    """Records a ``transformers.Trainer`` run: one ``ProfilerStep`` per optimizer step.

    Starts a ``StepProfiler`` at ``on_train_begin``, steps it at ``on_step_end`` and stops it at
    ``on_train_end``; the arguments are ``StepProfiler``'s and are checked here. The rank is
    torch.distributed's when the Trainer runs distributed. Injected ``dataloader_stall`` needs a
    wrapped loader and so does not apply to a Trainer.

    Example:
        ```python
        trainer = Trainer(model, args, train_dataset=data,
                          callbacks=[ProfilerCallback("traces/", schedule=StepSchedule(wait=10))])
        trainer.train()
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

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start recording: step 0 begins."""
        self.profiler.start()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """End the optimizer step that just ran and begin the next."""
        self.profiler.step()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Stop recording; a window still open is written."""
        self.profiler.stop()
