"""The edit language: what a what-if changes, as strings and as JSON, and the ``whatif.json``
that holds the true step times under each edit beside a captured or simulated job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.vocabulary import KernelClass

__all__ = ["COLLECTIVES", "WHATIF_NAME", "Edit", "EditKind", "edit_to_json", "parse_edit", "step_rows", "write_whatif"]

COLLECTIVES = ("allreduce", "reducescatter", "allgather", "sendrecv")
WHATIF_NAME = "whatif.json"  # beside a job's traces: the true step times under each edit


class EditKind(StrEnum):
    """The changes `whatif` can make."""

    COLLECTIVE_FASTER = "collective_faster"  # one collective kind's transfers k times faster
    KERNEL_FASTER = "kernel_faster"  # one kernel class k times faster
    MICROBATCHES = "microbatches"  # k times the micro-batches per step
    DATA_PARALLEL = "data_parallel"  # another data-parallel degree
    REMOVE_INJECTION = "remove_injection"  # one injected fault gone


@dataclass(frozen=True, slots=True)
class Edit:
    """One change to a job.

    Attributes:
        kind: what to change.
        target: the collective kind (``allreduce``, ``reducescatter``, ``allgather``,
            ``sendrecv``) or kernel class (``gemm``, ``attention``, ``elementwise``, ``optimizer``).
        factor: the speed-up (> 0), or the micro-batch multiplier (an integer >= 2).
        value: the new data-parallel degree, or the index of the injection to remove.
        keep_global_batch: with MICROBATCHES, divide the micro-batch size by ``factor``
            (it must divide it); else keep it, so the step does ``factor`` times the work.
    """

    kind: EditKind
    target: str = ""
    factor: float = 2.0
    value: int = 0
    keep_global_batch: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EditKind(self.kind))
        if self.kind == EditKind.COLLECTIVE_FASTER and self.target not in COLLECTIVES:
            names = ", ".join(COLLECTIVES)
            raise ConfigError(f"edit {self.kind}: unknown collective {self.target!r}; use one of {names}")
        if self.kind == EditKind.KERNEL_FASTER and self.target not in tuple(KernelClass):
            names = ", ".join(KernelClass)
            raise ConfigError(f"edit {self.kind}: unknown kernel class {self.target!r}; use one of {names}")
        if not self.factor > 0:
            raise ConfigError(f"edit {self.kind}: factor must be positive, got {self.factor}")
        if self.kind == EditKind.MICROBATCHES and (self.factor < 2 or self.factor % 1):
            raise ConfigError(f"edit {self.kind}: the micro-batch multiplier must be an integer >= 2")

    @classmethod
    def collective_faster(cls, kind: str, factor: float = 2.0) -> Edit:
        """Transfers of one collective kind ``factor`` times faster."""
        return cls(EditKind.COLLECTIVE_FASTER, target=kind, factor=factor)

    @classmethod
    def kernel_faster(cls, kernel_class: str, factor: float = 2.0) -> Edit:
        """Kernels of one class ``factor`` times faster."""
        return cls(EditKind.KERNEL_FASTER, target=kernel_class, factor=factor)

    @classmethod
    def more_microbatches(cls, factor: int = 2, keep_global_batch: bool = True) -> Edit:
        """``factor`` times the micro-batches per step."""
        return cls(EditKind.MICROBATCHES, factor=factor, keep_global_batch=keep_global_batch)

    @classmethod
    def data_parallel(cls, dp: int) -> Edit:
        """Data-parallel degree ``dp`` (same micro-batches per rank)."""
        return cls(EditKind.DATA_PARALLEL, value=dp)

    @classmethod
    def remove_injection(cls, index: int) -> Edit:
        """Drop ``config.injections[index]``."""
        return cls(EditKind.REMOVE_INJECTION, value=index)


_EDIT_RE = re.compile(r"(?P<kind>[a-z_]+)(?::(?P<target>[a-z]+))?(?:=(?P<number>\d+(?:\.\d+)?)x?)?")
_EDIT_SYNTAX = ("KIND[:TARGET][=NUMBER], e.g. collective_faster:allreduce=2, kernel_faster:gemm=2, "
                "microbatches=2, data_parallel=4, remove_injection=0")


def parse_edit(text: str) -> Edit:
    """Parse an edit as given on the command line: ``KIND[:TARGET][=NUMBER]``.

    NUMBER is the speed-up or micro-batch multiplier (default 2), the new data-parallel degree
    (required), or the index of the injection to remove (default 0).

    Raises:
        ConfigError: bad syntax, an unknown kind or target, or a missing data-parallel degree.
    """
    match = _EDIT_RE.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"edit {text!r}: expected {_EDIT_SYNTAX}")
    try:
        kind = EditKind(match["kind"])
    except ValueError:
        raise ConfigError(f"edit {text!r}: unknown kind {match['kind']!r}; "
                          f"use one of {', '.join(EditKind)}") from None
    number = match["number"]
    if kind in (EditKind.DATA_PARALLEL, EditKind.REMOVE_INJECTION):
        if kind == EditKind.DATA_PARALLEL and number is None:
            raise ConfigError(f"edit {text!r}: give the new degree, e.g. data_parallel=4")
        if number is not None and "." in number:
            raise ConfigError(f"edit {text!r}: {kind} takes a whole number")
        return Edit(kind, value=int(number or 0))
    return Edit(kind, target=match["target"] or "", factor=float(number or 2.0))


def edit_to_json(edit: Edit) -> dict[str, object]:
    """The edit as JSON-ready data, as ``whatif.json`` files hold it."""
    return {"kind": str(edit.kind), "target": edit.target, "factor": edit.factor, "value": edit.value,
            "keep_global_batch": edit.keep_global_batch}


def step_rows(before: Mapping[tuple[int, int], float],
              after: Mapping[tuple[int, int], float]) -> list[list[float | int | None]]:
    """``[step, rank, before_ms, after_ms]`` per (step, rank) of either side (null where a side lacks it)."""
    return [[s, r, before.get((s, r)), after.get((s, r))] for s, r in sorted(before.keys() | after.keys())]


def write_whatif(folder: Path, entries: Sequence[Mapping[str, object]]) -> None:
    """Writes ``folder/whatif.json``: ``{"edits": entries}``."""
    (Path(folder) / WHATIF_NAME).write_text(json.dumps({"edits": list(entries)}) + "\n")
