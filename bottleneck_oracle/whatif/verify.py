"""The closed loop: a plan's edits made to the job itself, the job run again, and its step measured
by the same analysis that made the prediction.

A synthetic job (``oracle synth``) is simulated again with the edits; a real capture (``oracle
capture``) is captured again where a capture can make the edit (a fault fixed or removed, another
micro-batch count or data-parallel degree). Either way the re-run's traces are analysed, so the
prediction and the measurement use one ruler.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.errors import ConfigError, TraceFormatError
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import Edit
from bottleneck_oracle.truth.manifest import MANIFEST_NAME
from bottleneck_oracle.whatif.predict import baseline_ms

__all__ = ["rerun", "rerun_step_ms", "verify_plan"]


def rerun(folder: Path, edits: Sequence[Edit], workers: int = 1) -> Analysis:
    """The analysis of the job in ``folder`` run again with ``edits``.

    Raises:
        ConfigError: no manifest there, or an edit the simulator or a capture cannot make.
        CaptureError: a rank of a re-capture failed.
    """
    folder = Path(folder)
    if not (folder / MANIFEST_NAME).is_file():
        raise ConfigError(f"{folder}: no {MANIFEST_NAME}; --verify re-runs a job made by oracle synth "
                          "or oracle capture")
    with tempfile.TemporaryDirectory(prefix="oracle-verify-") as tmp:
        out = Path(tmp) / "rerun"
        _rerun(folder, list(edits), out, workers)
        return analyze(read_trace(out, workers=workers))


def rerun_step_ms(folder: Path, edits: Sequence[Edit], step: int, workers: int = 1) -> float:
    """The wall time of ``step`` (its slowest complete rank) of the job in ``folder`` run again with ``edits``.

    Raises:
        ConfigError: no manifest there, or an edit the simulator or a capture cannot make.
        CaptureError: a rank of a re-capture failed.
    """
    return baseline_ms(rerun(folder, edits, workers), step)


def _rerun(folder: Path, edits: list[Edit], out: Path, workers: int) -> None:
    from bottleneck_oracle.synth.synthesize import load_synth_manifest

    try:
        manifest = load_synth_manifest(folder)
    except TraceFormatError:
        manifest = None
    if manifest is not None:
        from bottleneck_oracle.synth.synthesize import synthesize
        from bottleneck_oracle.synth.whatif import apply_edits

        config, tuning = apply_edits(manifest.config, edits)
        synthesize(out, config, workers=workers, tuning=tuning)
        return
    from bottleneck_oracle.capture.capture import capture, load_manifest
    from bottleneck_oracle.capture.whatif import apply_capture_edit

    config = load_manifest(folder).config
    for edit in edits:
        config = apply_capture_edit(config, edit)
    capture(out, config)


def verify_plan(folder: Path, plan: Sequence[Sequence[Edit]], step: int, workers: int = 1,
                alternatives: Mapping[Edit, Sequence[Edit]] | None = None,
                progress: Callable[[int, int], None] | None = None) -> tuple[list[float | None], str]:
    """The measured step time after each entry of a plan (each entry: every edit so far), None where
    the re-run cannot make an edit; and a note on what could not be verified.

    Args:
        alternatives: for an edit, the edits that make the same change to the job (a fix of a host
            pause that is also a straggler: the job may have injected either).
    """
    measured: list[float | None] = []
    notes: list[str] = []
    for i, edits in enumerate(plan):
        found, error = None, ""
        for variant in _variants(list(edits), alternatives or {}):
            try:
                found = rerun_step_ms(folder, variant, step, workers)
                break
            except ConfigError as e:
                error = error or str(e)
        measured.append(found)
        if found is None:
            notes.append(error)
        if progress:
            progress(i + 1, len(plan))
    return measured, "; ".join(dict.fromkeys(notes))


def _variants(edits: list[Edit], alternatives: Mapping[Edit, Sequence[Edit]]) -> list[list[Edit]]:
    """``edits``, then each way of swapping edits for their alternatives."""
    out = [[]]
    for edit in edits:
        out = [[*v, choice] for v in out for choice in (edit, *alternatives.get(edit, ()))]
    return out
