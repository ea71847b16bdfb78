"""What every command renders with: one JSON document on stdout, progress and notes on stderr.

Rich loads only when something is printed for a person, so ``--json`` runs never import it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

__all__ = ["bar", "print_json", "stderr", "stdout", "table"]


def print_json(data: object) -> None:
    """Writes ``data`` as one indented JSON document on stdout."""
    # numpy arrays come from column-wise reports
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def stdout(**options: Any) -> Console:
    """The console for the result a person reads."""
    from rich.console import Console

    return Console(**options)


def stderr() -> Console:
    """The console for progress and notes, kept apart from the result on stdout."""
    from rich.console import Console

    return Console(stderr=True)


def table(title: str, columns: tuple[str, ...], right: tuple[str, ...] = (), **options: Any) -> Table:
    """A left-titled table of ``columns``, those in ``right`` right-aligned."""
    from rich.table import Table

    out = Table(title=title, title_justify="left", **options)
    for col in columns:
        out.add_column(col, justify="right" if col in right else "left", overflow="fold")
    return out


def bar(console: Console, what: str) -> Progress:
    """A transient progress bar labelled ``what``, with a count and the current item."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                    TimeElapsedColumn(), console=console, transient=True)
