"""``oracle analyze``: the execution graph, each step's critical path, and why the slow steps are slow."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from bottleneck_oracle.cli._render import print_json, stderr
from bottleneck_oracle.config import Settings
from bottleneck_oracle.dag.analysis import analyze
from bottleneck_oracle.dag.overlay import write_overlay
from bottleneck_oracle.dag.report import analysis_to_dict
from bottleneck_oracle.dag.types import CATEGORIES
from bottleneck_oracle.traces import read_trace

__all__ = ["analyze_command"]

_SHORT = {"gpu_compute": "gpu", "communication": "comm", "cpu": "cpu", "launch_overhead": "launch",
          "sync_wait": "sync", "data_loading": "data", "idle": "idle"}


def analyze_command(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or folders (one file per rank; .json or .json.gz).")],
    step: Annotated[Optional[int], typer.Option(help="Report only this ProfilerStep number.")] = None,
    rank: Annotated[Optional[int], typer.Option(help="Report only this rank.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    overlay: Annotated[Optional[Path], typer.Option(help="Write a Perfetto trace with the critical path marked.")] = None,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
) -> None:
    """Build the execution graph, find each step's critical path, and explain the slow steps."""
    settings = Settings.from_env()
    err = stderr()
    with err.status("reading traces...") if not as_json else nullcontext():
        trace = read_trace(paths, workers=settings.workers, partial=partial)
    with err.status("analysing...") if not as_json else nullcontext():
        a = analyze(trace)
    data = analysis_to_dict(a, step=step, rank=rank)
    if overlay is not None:
        marked = write_overlay(a, overlay, step=step, rank=rank)
        err.print(f"overlay: {overlay} ({marked} critical nodes marked; open it in ui.perfetto.dev)")
    if as_json:
        print_json(data)
        return
    console = Console()
    t = data["trace"]
    console.print(f"[bold]{len(t['ranks'])} rank(s)[/], {t['events']:,} events, {t['nodes']:,} nodes, "
                  f"{t['edges']:,} edges; {t['collectives_matched']} of {t['collectives']} collectives matched "
                  f"across ranks" + ("" if t["steps_annotated"] else "; no ProfilerStep: the whole trace is one step"))
    _steps_table(data, console)
    _findings_table(data, console)
    _why_slowest(data, console)


def _steps_table(data: dict, console: Console) -> None:
    table = Table(title="Steps: wall time and where it went (ms, critical path)", title_justify="left")
    for col in ["step", "rank", "wall", *(_SHORT[c.value] for c in CATEGORIES), ""]:
        table.add_column(col, justify="right" if col not in ("",) else "left")
    for s in data["steps"]:
        mark = "[bold red]slow[/]" if s["slow"] else ("partial" if s["partial"] else "")
        cells = [f"{s['breakdown_ms'][c.value]:.1f}" for c in CATEGORIES]
        table.add_row(str(s["step"]), str(s["rank"]), f"{s['wall_ms']:.1f}", *cells, mark)
    console.print(table)


def _findings_table(data: dict, console: Console) -> None:
    if not data["findings"]:
        console.print("No bottleneck found: no step stands out and no category dominates.")
        return
    table = Table(title="Findings (largest impact first)", title_justify="left", show_lines=False)
    for col in ("category", "step", "ranks", "impact ms", "evidence"):
        table.add_column(col, overflow="fold")
    for f in data["findings"][:15]:
        step = "all" if f["step"] is None else str(f["step"])
        table.add_row(f["category"], step, ",".join(map(str, f["ranks"])), f"{f['impact_ms']:.1f}", f["evidence"])
    console.print(table)


def _why_slowest(data: dict, console: Console) -> None:
    if not data["steps"]:
        return
    slowest = max(data["steps"], key=lambda s: s["wall_ms"] if not s["partial"] else -1)
    step, rank = slowest["step"], slowest["rank"]
    label = "the whole trace" if step < 0 else f"step {step}"
    console.print(f"\n[bold]Why is {label} slow?[/] (rank {rank}, {slowest['wall_ms']:.1f} ms)")
    peers = [s["wall_ms"] for s in data["steps"] if s["rank"] == rank and s["step"] != step and not s["partial"]]
    if peers:
        peers.sort()
        console.print(f"  the rank's other steps take {peers[len(peers) // 2]:.1f} ms (median)")
    reasons = [f for f in data["findings"] if f["step"] == step] or [f for f in data["findings"] if f["step"] is None]
    for f in reasons[:3]:
        console.print(f"  - [bold]{f['category']}[/]: {f['evidence']}", highlight=False)
    top = sorted(slowest["critical_path"], key=lambda e: -e["contrib_us"])[:5]
    console.print("  largest items on its critical path:")
    for e in top:
        console.print(f"    {e['contrib_us'] / 1000:8.2f} ms  {e['category']:<15} rank {e['rank']}  {e['name'][:80]}",
                      highlight=False)
