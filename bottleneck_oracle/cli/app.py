"""The ``oracle`` app: its commands, one module per group, and the one place errors become exit codes."""

from __future__ import annotations

import sys

import typer

from bottleneck_oracle.cli._render import stderr
from bottleneck_oracle.cli.analyze import analyze_command
from bottleneck_oracle.cli.ask import ask_command, chat_command
from bottleneck_oracle.cli.db import db_app, ingest_command, traces_command
from bottleneck_oracle.cli.diff import diff_command
from bottleneck_oracle.cli.doctor import doctor_command
from bottleneck_oracle.cli.eval import eval_app
from bottleneck_oracle.cli.hang import hang_command
from bottleneck_oracle.cli.mcp import mcp_command
from bottleneck_oracle.cli.model import gnn_eval_command, train_command
from bottleneck_oracle.cli.record import (
    capture_command,
    dataset_build_command,
    synth_command,
)
from bottleneck_oracle.cli.scan import scan_command
from bottleneck_oracle.cli.serve import serve_command
from bottleneck_oracle.cli.stragglers import stragglers_command
from bottleneck_oracle.cli.whatif import optimize_command, whatif_command
from bottleneck_oracle.errors import OracleError

__all__ = ["app", "main"]

app = typer.Typer(
    name="oracle", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Find what makes a training step slow from its PyTorch profiler traces.",
)
dataset_app = typer.Typer(name="dataset", no_args_is_help=True, help="Corpora of synthetic traces with ground truth.")
dataset_app.command("build")(dataset_build_command)
app.command("analyze")(analyze_command)
app.command("scan")(scan_command)
app.command("capture")(capture_command)
app.add_typer(db_app)
app.command("ingest")(ingest_command)
app.command("traces")(traces_command)
app.command("synth")(synth_command)
app.add_typer(dataset_app)
app.command("train")(train_command)
app.command("gnn-eval")(gnn_eval_command)
app.command("whatif")(whatif_command)
app.command("optimize")(optimize_command)
app.command("diff")(diff_command)
app.command("hang")(hang_command)
app.command("stragglers")(stragglers_command)
app.command("ask")(ask_command)
app.command("chat")(chat_command)
app.command("mcp")(mcp_command)
app.command("serve")(serve_command)
app.add_typer(eval_app)
app.command("doctor")(doctor_command)


@app.callback()
def _group() -> None:
    """Find what makes a training step slow from its PyTorch profiler traces."""


def main() -> None:
    """Entry point: bad input exits 2 and an internal failure 1, each with a one-line reason."""
    try:
        app()  # usage errors exit 2 inside, as click does
    except OracleError as e:
        _print_error(str(e))
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 - the one place that turns a bug into exit 1
        _print_error(f"internal error: {type(e).__name__}: {e}")
        sys.exit(1)


def _print_error(message: str) -> None:
    stderr().print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
