"""``oracle mcp``: the agent's tools served over the Model Context Protocol on stdio.

stdout carries the protocol alone; what a person may read (a trace loading) goes to stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape

from bottleneck_oracle.cli._render import stderr
from bottleneck_oracle.config import Settings

__all__ = ["mcp_command"]


def mcp_command(
    trace: Annotated[Optional[str], typer.Option(
        "--trace", help="The trace the tools use when a call names none: an id, a name or a path (ingested "
                        "on first use); default: the newest loaded.")] = None,
) -> None:
    """Serve the agent's tools to an MCP client (Claude Desktop, Cursor, ...) over stdin/stdout."""
    from bottleneck_oracle.agent.mcp_server import serve_stdio

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("bottleneck_oracle.agent.mcp_server").setLevel(logging.INFO)  # each tool call, on stderr
    console = stderr()
    serve_stdio(Settings.from_env(), trace=trace,
                stage=lambda what: console.print(f"[dim]{escape(what)}...[/]", highlight=False))
