"""``oracle doctor``: what this machine has of what the project needs, and how to get what is missing."""

from __future__ import annotations

import os
import textwrap
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from bottleneck_oracle.cli._render import brief, paragraph, print_json, stdout
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import SetupError

if TYPE_CHECKING:
    from rich.console import Console

    from bottleneck_oracle.workspace.doctor import Check

__all__ = ["doctor_command"]

_WIDE = 18  # the longest check name, "extra integrations"


def doctor_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Check this machine for what the project needs, and say how to get what is missing.

    Python, each extra, the embedded FalkorDB (started in a scratch folder, asked, stopped), the
    sentence model, torch, chromium and node (for the tests), Neo4j at NEO4J_URI when set, and free
    disk in the workspace. Exit 2 when a required check fails.
    """
    from bottleneck_oracle.workspace.doctor import run_checks

    console = None if as_json else stdout()
    checks = run_checks(Settings.from_env(), neo4j_uri=os.environ.get("NEO4J_URI") or None,
                        each=None if console is None else (lambda c: _print(console, c)))
    failed = [c for c in checks if c.required and not c.ok]
    if as_json:
        print_json({"ok": not failed, "checks": [asdict(c) for c in checks]})
    if len(failed) == 1:
        raise SetupError(f"{failed[0].name}: {failed[0].detail}; fix: {failed[0].fix}")
    if failed:
        raise SetupError(f"{len(failed)} required checks failed: "
                         + "; ".join(f"{c.name} (fix: {c.fix})" for c in failed))


def _marks(console: Console) -> dict[str, str]:
    """Check marks: ✓ ✗ ! on a terminal with colour, plain words in a pipe, a log or under NO_COLOR."""
    if console.is_terminal and console.color_system is not None:
        return {"ok": "[green]✓[/]   ", "fail": "[red]✗[/]   ", "warn": "[yellow]![/]   "}  # as wide as a word
    return {"ok": "ok  ", "fail": "FAIL", "warn": "warn"}


def _print(console: Console, check: Check) -> None:
    """One line per check that passes; a failure's whole reason, then its fix, beneath."""
    mark = _marks(console)["ok" if check.ok else "fail" if check.required else "warn"]
    head, indent = f"{check.name:<{_WIDE}} ", 5 + _WIDE + 1
    console.print(f"{mark} ", end="", highlight=False)
    if check.ok:
        console.print(head + brief(check.detail, console.width - indent), markup=False, highlight=False)
        return
    first, *rest = textwrap.wrap(check.detail, max(console.width - indent, 20)) or [""]
    console.print(head + first, markup=False, highlight=False, soft_wrap=True)
    if rest:
        paragraph(console, " ".join(rest), indent)
    paragraph(console, f"fix: {check.fix}", indent)
