"""docs/commands.md is the CLI's own help: regenerated here, it must equal the committed page."""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GEN = runpy.run_path(str(REPO / "tools" / "gen_commands_doc.py"))


def test_commands_page_matches_the_cli() -> None:
    page = (REPO / "docs" / "commands.md").read_text()
    assert page == GEN["render"](), f"docs/commands.md is out of date with the CLI: run `{GEN['REGENERATE']}`"


def test_every_command_has_its_section() -> None:
    """The walk reaches every command and subcommand the app registers, nested groups included."""
    import typer.main

    from bottleneck_oracle.cli.app import app

    root = typer.main.get_command(app)
    page = GEN["render"]()
    ctx = GEN["context"](root, "oracle")
    for name in root.list_commands(ctx):
        assert f"\n## oracle {name}\n" in page
        sub = root.get_command(ctx, name)
        for child in sub.list_commands(ctx) if hasattr(sub, "list_commands") else ():
            assert f"\n## oracle {name} {child}\n" in page
    assert "\x1b[" not in page and "╭" not in page  # no colour, no rich panels
