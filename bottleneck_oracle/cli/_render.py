"""What every command renders with: one JSON document on stdout, progress and notes on stderr.

Rich loads only when something is printed for a person, so ``--json`` runs never import it. Colour,
spinners and progress bars appear only on a terminal; ``NO_COLOR`` (any value) turns off every
style, bold included, so that such output holds no escape codes.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

__all__ = ["CATEGORY_SHORT", "bar", "brief", "middle", "paragraph", "print_json", "ranks_text", "spinner", "stderr", "stdout",
           "table"]

ELLIPSIS = "…"


# a breakdown's categories as column heads
CATEGORY_SHORT = {"gpu_compute": "gpu", "communication": "comm", "cpu": "cpu", "launch_overhead": "launch",
                  "sync_wait": "sync", "data_loading": "data", "idle": "idle"}

def print_json(data: object) -> None:
    """Writes ``data`` as one indented JSON document on stdout."""
    # numpy arrays come from column-wise reports
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def _console(**options: Any) -> Console:
    from rich.console import Console

    if os.environ.get("NO_COLOR"):  # no-color.org; rich alone would still print bold
        options.setdefault("color_system", None)
    return Console(**options)


def stdout(**options: Any) -> Console:
    """The console for the result a person reads (as wide as the terminal, or $COLUMNS, else 80)."""
    return _console(**options)


def stderr() -> Console:
    """The console for progress and notes, kept apart from the result on stdout."""
    return _console(stderr=True)


def spinner(console: Console, what: str) -> AbstractContextManager[object]:
    """A spinner labelled ``what`` while a block runs, on a terminal only (never in a pipe or a log)."""
    return console.status(what) if console.is_terminal else nullcontext()


def table(title: str, columns: tuple[str, ...], right: tuple[str, ...] = (), *, wide: tuple[str, ...] = (),
          **options: Any) -> Table:
    """A left-titled table of ``columns`` that fits the console: borders only under the header,
    every cell on one line, only the ``wide`` columns (free text) wrapped; ``right`` ones right-aligned."""
    from rich import box
    from rich.table import Table

    # min_width: the title on one line where the terminal is wide enough
    options = {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, "collapse_padding": True,
               "title_style": "bold", "min_width": len(title), **options}
    out = Table(title=title, title_justify="left", **options)
    for col in columns:
        free = col in wide
        out.add_column(col, justify="right" if col in right else "left", no_wrap=not free,
                       overflow="fold" if free else "ellipsis", min_width=None if free else len(col))
    return out


def bar(console: Console, what: str) -> Progress:
    """A transient progress bar labelled ``what``, with a count and the current item; it draws
    nothing where ``console`` is no terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                    TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal)


def middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in the middle, where "…" stands for what was left out:
    an op name keeps its namespace and its end (``--json`` has every name in full)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = width // 2
    return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head):]


def brief(sentence: str, width: int) -> str:
    """The first clause of ``sentence`` (up to its first "; ") fitted to ``width``: quoted names cut
    in the middle, then parentheses and trailing ", ..." clauses dropped, then cut at a word with "…"."""
    text = re.sub(r"'([^']{33,})'", lambda m: f"'{middle(m[1], 32)}'", sentence.split("; ")[0])
    if len(text) > width:
        text = re.sub(r" \([^()]*\)", "", text)
    while len(text) > width and ", " in text:
        text = text.rsplit(", ", 1)[0]
    if len(text) <= width:
        return text
    cut = text[:max(width - 1, 0)]
    return (cut.rsplit(" ", 1)[0] if " " in cut[width // 2:] else cut) + ELLIPSIS  # at a word when one is near


def paragraph(console: Console, text: str, indent: int = 2, hang: int = 0) -> None:
    """Prints ``text`` as it is (no markup), wrapped to the console, its first line indented by
    ``indent`` spaces and the others by ``indent + hang``."""
    lines = textwrap.wrap(text, max(console.width, indent + hang + 20), initial_indent=" " * indent,
                          subsequent_indent=" " * (indent + hang), break_on_hyphens=False) or [""]
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)


def ranks_text(ranks: list[int]) -> str:
    """Ranks as short runs: [0, 1, 2, 3, 7] -> "0-3,7"; none -> "all"."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs) or "all"
