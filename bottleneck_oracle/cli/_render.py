"""What every command renders with: one JSON document on stdout, progress on stderr."""

from __future__ import annotations

import sys

import orjson
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["bar", "print_json", "stderr"]


def print_json(data: object) -> None:
    """Writes ``data`` as one indented JSON document on stdout."""
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2, default=_plain) + b"\n")


def _plain(value: object) -> object:
    # numpy scalars and arrays reach here from column-wise reports
    if hasattr(value, "tolist"):
        return value.tolist()  # type: ignore[no-any-return, attr-defined]
    raise TypeError(f"not JSON: {type(value).__name__}")


def stderr() -> Console:
    """The console for progress and notes, kept apart from the result on stdout."""
    return Console(stderr=True)


def bar(console: Console, what: str) -> Progress:
    """A transient progress bar labelled ``what``, with a count and the current item."""
    return Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                    TimeElapsedColumn(), console=console, transient=True)
