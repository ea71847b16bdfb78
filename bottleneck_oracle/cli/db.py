"""``oracle db``, ``oracle ingest`` and ``oracle traces``: the graph database and what it holds.
The database client loads only when one of these commands runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bottleneck_oracle.cli._executor import ExecutorOption, RayAddressOption, settings_for
from bottleneck_oracle.cli._render import bar, paragraph, print_json, spinner, stderr, stdout, table
from bottleneck_oracle.config import EMBEDDED_GRAPH_URL, Settings
from bottleneck_oracle.errors import ConfigError

if TYPE_CHECKING:
    from bottleneck_oracle.graphdb import Detail

__all__ = ["db_app", "ingest_command", "traces_command"]

db_app = typer.Typer(name="db", no_args_is_help=True, help="Start, stop or check the embedded graph database.")


def _embedded_only(settings: Settings) -> None:
    if settings.graph_url != EMBEDDED_GRAPH_URL:
        raise ConfigError(f"ORACLE_GRAPH_URL is {settings.graph_url}: only the embedded server is started and "
                          "stopped by oracle")


@db_app.command("start")
def db_start_command() -> None:
    """Start the workspace's FalkorDB server (or report the one running)."""
    from bottleneck_oracle.graphdb import start_server

    settings = Settings.from_env()
    _embedded_only(settings)
    with spinner(stderr(), "starting FalkorDB..."):
        info = start_server(settings.home, binary=settings.falkordb_server)
    state = "started" if info.is_new else "already running"
    stdout().print(f"FalkorDB {state} at 127.0.0.1:{info.port} (pid {info.pid}); data in {info.files.data}")


@db_app.command("stop")
def db_stop_command() -> None:
    """Save a snapshot and stop the workspace's FalkorDB server."""
    from bottleneck_oracle.graphdb import stop_server

    settings = Settings.from_env()
    _embedded_only(settings)
    with spinner(stderr(), "saving and stopping FalkorDB..."):
        stopped = stop_server(settings.home)
    stdout().print("FalkorDB stopped; snapshot saved" if stopped else "FalkorDB was not running")


@db_app.command("status")
def db_status_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Say whether the graph database runs, where, and what it holds."""
    from bottleneck_oracle.graphdb import list_traces, open_store, server_status

    settings = Settings.from_env()
    info = server_status(settings.home) if settings.graph_url == EMBEDDED_GRAPH_URL else None
    data: dict[str, object] = {"url": settings.graph_url, "running": info is not None}
    if info is not None:
        data |= {"pid": info.pid, "port": info.port, "data": str(info.files.data),
                 "snapshot_bytes": info.files.rdb.stat().st_size if info.files.rdb.exists() else 0}
    if info is not None or settings.graph_url != EMBEDDED_GRAPH_URL:
        with open_store(settings) as store:
            data["traces"] = len(list_traces(store))
    if as_json:
        print_json(data)
        return
    if settings.graph_url == EMBEDDED_GRAPH_URL and info is None:
        stdout().print("FalkorDB is not running (start it with `oracle db start`)")
        return
    console = stdout()
    for key, value in data.items():  # a field a line: a long data path never wraps into the next
        console.print(f"{key + ':':<15} {value}", markup=False, highlight=False, soft_wrap=True)


def ingest_command(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or folders (one file per rank; .json or .json.gz).")],
    detail: Annotated[str, typer.Option(help="full: every op; critical: critical paths and their neighbourhood; "
                                             "summary: steps and findings.")] = "full",
    hops: Annotated[int, typer.Option(help="Neighbourhood radius around the critical paths (--detail critical).")] = 1,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
    steps_from: Annotated[Optional[str], typer.Option(
        "--steps-from", metavar="REGEX", help="Make the user annotations whose name matches REGEX the steps, "
        "as `oracle analyze --steps-from` does.")] = None,
    predict: Annotated[bool, typer.Option(help="Store the graph model's step times and op criticality too.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Analyze a trace and load it into the graph database (starting the embedded one if needed)."""
    from bottleneck_oracle.graphdb import Detail
    from bottleneck_oracle.workspace.ingest import ingest

    level = _detail(detail, Detail)
    with bar(stderr(), "ingest") as progress:
        task = progress.add_task("", total=None)
        done = ingest(paths, settings_for(executor, ray_address), detail=level, hops=hops, partial=partial, steps_from=steps_from,
                      predict=predict,
                      stage=lambda what: progress.update(task, description=what + "..."),
                      progress=lambda n, total: progress.update(task, completed=n, total=total))
    report = done.report
    if as_json:
        print_json({"trace_id": report.trace_id, "detail": report.detail.value, "outcome": report.outcome,
                    "nodes": report.nodes, "relationships": report.relationships, "batches": report.batches,
                    "resumed_after": report.resumed_after, "retries": report.retries,
                    "seconds": round(report.seconds, 3), "predictions": done.predictions})
        return
    what = {"loaded": "loaded",
            "resumed": f"finished an interrupted load ({report.resumed_after + 1:,} batches were in already)",
            "unchanged": "already loaded, nothing to do"}[report.outcome]
    retried = f", resuming {report.retries} times after the database dropped the connection" if report.retries else ""
    paragraph(stdout(), f"{done.name}: {what}: trace {report.trace_id} ({report.detail.value}), {report.nodes:,} "
              f"nodes and {report.relationships:,} relationships in {report.seconds:.1f} s{retried}", 0, hang=2)


def _detail(text: str, kind: type[Detail]) -> Detail:
    try:
        return kind(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not one of {', '.join(d.value for d in kind)}",
                                 param_hint="'--detail'") from None


def traces_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """List the traces loaded in the graph database."""
    from rich.markup import escape  # a trace's name is data

    from bottleneck_oracle.graphdb import list_traces, open_store

    with open_store(Settings.from_env()) as store:
        traces = list_traces(store)
    if as_json:
        print_json([{"trace_id": t.trace_id, "name": t.name, "status": t.status, "detail": t.detail.value,
                     "ranks": t.ranks, "steps": t.steps, "ops": t.ops, "relationships": t.relationships,
                     "loaded_at": t.loaded_at} for t in traces])
        return
    if not traces:
        stdout().print("No trace loaded (load one with `oracle ingest PATH`).")
        return
    counts = ("ranks", "steps", "ops", "rels")
    rows = table("Traces in the graph database (rels: relationships)", ("trace", "name", *counts, "loaded", "detail"),
                 right=counts, wide=("name", "detail"))
    for t in traces:
        loaded = time.strftime("%m-%d %H:%M", time.localtime(t.loaded_at)) if t.loaded_at else "-"
        state = t.detail.value + ("" if t.status == "complete" else f", [bold yellow]{t.status}[/]: ingest again")
        rows.add_row(t.trace_id, escape(t.name), str(t.ranks), str(t.steps), f"{t.ops:,}", f"{t.relationships:,}",
                     loaded, state)
    stdout().print(rows)
