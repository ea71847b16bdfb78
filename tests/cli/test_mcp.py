"""``oracle mcp``: its flags (the protocol itself is tested in tests/agent/test_mcp_server.py)."""

from __future__ import annotations

import typer.main

from bottleneck_oracle.cli import app


def test_mcp_flag_set_is_frozen() -> None:
    command = typer.main.get_command(app).commands["mcp"]  # type: ignore[attr-defined]
    assert sorted(p.name for p in command.params) == ["trace"]
