"""docs/commands.md from the ``oracle`` CLI's own help: every command and subcommand, rendered stably.

Run ``.venv/bin/python tools/gen_commands_doc.py --write`` (``make docs`` does) after adding a command or
an option; without a flag it prints the page, and ``--check`` exits 1 when the committed page and the CLI
disagree (as ``tests/cli/test_commands_doc.py`` fails).

The help is the plain (click) formatting at a fixed width, with Typer's rich panels turned off (they
depend on the terminal and on colour), walked over the command tree in the order the app registers
its commands. Typer vendors its own click, so the tree's own context class is used, never ``import click``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main

from bottleneck_oracle.cli.app import app

WIDTH = 100
PAGE = Path(__file__).resolve().parents[1] / "docs" / "commands.md"
REGENERATE = ".venv/bin/python tools/gen_commands_doc.py --write"


def context(cmd: Any, name: str, parent: Any = None) -> Any:
    """A help context of fixed width for ``cmd``."""
    return cmd.context_class(cmd, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH)


def walk(cmd: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
    """Every command under ``cmd`` (itself first), each with its own context, in registration order."""
    yield cmd, ctx
    for name in cmd.list_commands(ctx) if hasattr(cmd, "list_commands") else ():
        sub = cmd.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            yield from walk(sub, context(sub, name, ctx))


def plain_help(cmd: Any, ctx: Any) -> str:
    """The command's help at WIDTH columns, as plain text."""
    cmd.rich_markup_mode = None  # Typer's switch to its plain (click) formatting
    formatter = ctx.make_formatter()
    cmd.format_help(ctx, formatter)
    return "\n".join(line.rstrip() for line in formatter.getvalue().splitlines()).strip("\n")


def anchor(path: str) -> str:
    """GitHub's anchor of a ``## path`` heading."""
    return path.lower().replace(" ", "-")


def render() -> str:
    """The whole page."""
    root = typer.main.get_command(app)
    commands = list(walk(root, context(root, "oracle")))
    lines = [
        "# Commands",
        "",
        "Generated from the CLI's own help by `tools/gen_commands_doc.py`; do not edit by hand. Regenerate:",
        "",
        f"    {REGENERATE}",
        "",
        "`tests/cli/test_commands_doc.py` fails when this page and the CLI disagree.",
        "Back to the [README](../README.md).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for cmd, ctx in commands[1:]:
        path = ctx.command_path
        lines.append(f"| [`{path}`](#{anchor(path)}) | {cmd.get_short_help_str(limit=90)} |")
    for cmd, ctx in commands:
        lines += ["", f"## {ctx.command_path}", "", "```text", plain_help(cmd, ctx), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if "--write" in argv:  # (a redirect would leave an empty page behind a failing run)
        PAGE.write_text(page)
        return 0
    if "--check" in argv:
        if PAGE.read_text() != page:
            print(f"docs/commands.md is out of date with the CLI: run `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
