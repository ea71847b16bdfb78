"""``oracle scan``: a job of any size, one rank at a time: its steps and their critical paths, the slow ones,
every bottleneck with the cause of each slow step, the GPU."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import numpy as np
import typer

from bottleneck_oracle.cli._executor import ExecutorOption, RayAddressOption, settings_for
from bottleneck_oracle.cli._render import (
    CATEGORY_SHORT,
    bar,
    brief,
    paragraph,
    print_json,
    ranks_text,
    stderr,
    stdout,
    table,
)

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["scan_command"]

_GPU_ROWS = 8  # ranks listed in the GPU table: the least busy first
_CAUSES = 5  # other slow steps whose cause is said


def scan_command(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or folders (one file per rank; .json or .json.gz).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
    steps_from: Annotated[Optional[str], typer.Option(
        "--steps-from", metavar="REGEX", help="Make the user annotations (record_function ranges) whose name "
        "matches REGEX the steps, numbered 0, 1, ... per rank, instead of ProfilerStep#N.")] = None,
    critical_paths: Annotated[bool, typer.Option(
        "--paths/--no-paths", help="Stitch each step's critical path through the ranks and its breakdown (the "
        "driver holds each rank's chains, tens of bytes per event); --no-paths holds its collectives only.")] = True,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print each finding's evidence in full.")] = False,
    whatif: Annotated[Optional[list[str]], typer.Option(
        "--whatif", metavar="EDIT", help="Replay a node edit, repeatable: 'scale SELECTOR xK', 'remove SELECTOR', "
        "'set SELECTOR MS' (as oracle whatif's); every step's wall time under it, oracle whatif's replay to the "
        "digit.")] = None,
    model: Annotated[bool, typer.Option(
        "--model", help="Also ask the graph model, rank by rank: each step's predicted wall time and the critical "
        "path its walk finds, as oracle whatif's gnn has them.")] = False,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Read a job one rank at a time: every step's wall time on every rank and its critical path through the
    ranks, the slow steps, every bottleneck with the cause of each slow step, and what each GPU did. No process
    holds more than one rank's events, so it runs on jobs too large for analyze; its numbers are analyze's."""
    from bottleneck_oracle.cli.analyze import print_findings, print_why_slowest
    from bottleneck_oracle.executor import executor_of
    from bottleneck_oracle.gnn.scan_model import model_rounds, model_to_dict
    from bottleneck_oracle.job.scan import scan
    from bottleneck_oracle.job.scan_report import scan_to_dict
    from bottleneck_oracle.truth.edits import parse_edit

    settings = settings_for(executor, ray_address)
    edits = [parse_edit(e) for e in whatif or []]
    with bar(stderr(), "scan") as progress:
        task = progress.add_task("", total=None)
        s = scan(paths, executor_of(settings), partial=partial, steps_from=steps_from, critical_paths=critical_paths,
                 edits=edits, then=model_rounds() if model else None,
                 progress=lambda what, n, total: progress.update(task, description=what, completed=n, total=total))
    data = scan_to_dict(s)
    if model:
        data["model"] = model_to_dict(s.then, s)  # type: ignore[arg-type]
    if as_json:
        print_json(data)
        return
    console = stdout()
    size = data["summary_bytes"]
    secs = data["seconds"]
    paragraph(console, f"{len(s.ranks)} rank(s), {s.events:,} events, read one rank at a time in {secs['map']:.1f} s "
              f"(a rank's summary: {size['median'] / 1e3:,.0f} KB), joined in {secs['reduce']:.1f} s; "
              f"{data['collectives_matched']:,} of {data['collectives']:,} collectives matched across ranks", indent=0)
    if data["clocks"]:
        paragraph(console, f"Clocks put in step: {data['clocks']}")
    _steps_table(data, console)
    _slowest_path(data, console)
    if critical_paths:
        print_findings(data, console, verbose)
        _other_causes(data, console, print_why_slowest(data, console, verbose))
    else:
        _stragglers(data, console, verbose)
    _gpu_table(data, console)
    _whatif_table(data, console)
    _model_table(data, console)
    where = " ".join(str(p) for p in paths)
    if not critical_paths:
        paragraph(console, f"Every detector and the cause of each slow step: oracle scan {where} (with the paths)",
                  indent=0)
    paragraph(console, f"What to change first, and what it would buy: oracle optimize {where} (it holds every rank "
              "in one process)", indent=0)


def _other_causes(data: dict, console: Console, shown: int | None) -> None:
    """The cause of each slow step but ``shown`` (``findings/cause.py``), largest first: a large job has many."""
    from bottleneck_oracle.analysis.report import cause_text

    causes = [f for f in data["findings"] if f.get("cause") and f["step"] != shown]
    if causes:
        console.print("[bold]The other slow steps' causes[/]")
    for f in causes[:_CAUSES]:
        paragraph(console, f"step {f['step']}: " + cause_text(f))


def _steps_table(data: dict, console: Console) -> None:
    """One row per step: its wall time over the ranks, the slowest rank, and the ranks where it is slow."""
    by_step: dict[int, list[dict]] = {}
    for row in data["steps"]:
        by_step.setdefault(row["step"], []).append(row)
    if not by_step:
        console.print("No step with work in any rank.")
        return
    cols = ("step", "ranks", "min", "median", "max", "slowest", "slow on")
    rows = table("Steps: wall time over the ranks (ms)", cols, right=cols[:5], wide=("slow on",))
    for step, mine in sorted(by_step.items()):
        walls = np.array([r["wall_ms"] for r in mine])
        worst = mine[int(np.argmax(walls))]
        slow = [r["rank"] for r in mine if r["slow"]]
        cut = [r["rank"] for r in mine if r["partial"]]
        rows.add_row(str(step), str(len(mine)), f"{walls.min():.1f}", f"{np.median(walls):.1f}", f"{walls.max():.1f}",
                     f"rank {worst['rank']}", (f"[bold red]{ranks_text(slow)}[/]" if slow else "")
                     + (f" partial: {ranks_text(cut)}" if cut else ""))
    console.print(rows)


def _slowest_path(data: dict, console: Console) -> None:
    """Where the time of the slowest (step, rank) went: its critical path's breakdown (its largest ops follow,
    in why the slowest step is slow)."""
    if not any("breakdown_ms" in r for r in data["steps"]):
        return
    worst = max(data["steps"], key=lambda r: (r["slow"], r["wall_ms"]))
    parts = ", ".join(f"{CATEGORY_SHORT[c]} {v:.1f}" for c, v in sorted(worst["breakdown_ms"].items(), key=lambda x: -x[1])
                      if v >= 0.05)
    console.print(f"[bold]Step {worst['step']} on rank {worst['rank']}[/] ({worst['wall_ms']:.1f} ms), its critical "
                  f"path through the ranks (ms): {parts}", highlight=False)


def _stragglers(data: dict, console: Console, verbose: bool) -> None:
    if not data["stragglers"]:
        console.print("No rank reached collectives late enough to be a straggler.")
        return
    console.print("[bold]Stragglers[/], largest impact first" + ("" if verbose else " (-v: all the evidence)"))
    for f in data["stragglers"][:10]:
        where = f"step {f['step']}" if f["step"] is not None else "most steps"
        head = f"  rank {', '.join(map(str, f['ranks']))}, {where}: {f['impact_ms']} ms ({f['severity']}); "
        paragraph(console, head + (f["evidence"] if verbose else brief(f["evidence"], console.width - len(head) - 2)),
                  indent=0, hang=4)


def _whatif_table(data: dict, console: Console) -> None:
    """Each step's wall time under the edits: its slowest rank's, recorded and replayed."""
    w = data["whatif"]
    if w is None:
        return
    title = f"What if: {'; '.join(w['edits'])} (nodes: {', '.join(f'{n:,}' for n in w['touched'])}); ms, slowest rank"
    cols = ("step", "recorded", "replayed", "saved", "rank after")
    rows = table(title, cols, right=cols[:4])
    for r in w["steps"]:
        share = r["saved_ms"] / r["recorded_ms"] if r["recorded_ms"] else 0.0
        rows.add_row(str(r["step"]), f"{r['recorded_ms']:.3f}", f"{r['replay_ms']:.3f}",
                     f"{r['saved_ms']:.3f} ({share:.0%})", f"rank {r['replay_rank']}")
    console.print(rows)
    paragraph(console, "The edited graph replayed: the DAG's dependencies decide again what waits for what; "
              "interference the edit changes is not in it (oracle whatif also asks the graph model).", indent=0)


def _model_table(data: dict, console: Console) -> None:
    """Each step's wall time as the graph model predicts it, and the largest node of its walk."""
    m = data.get("model")
    if m is None:
        return
    cols = ("step", "recorded", "model", "error", "walk", "largest on the walk")
    rows = table("The graph model, rank by rank (ms; walk: the nodes its critical path visits)", cols,
                 right=cols[:5], wide=("largest on the walk",))
    for r in m["steps"]:
        err = (r["model_ms"] - r["recorded_ms"]) / r["recorded_ms"] if r["recorded_ms"] else 0.0
        first = r["top"][0] if r["top"] else None
        rows.add_row(str(r["step"]), f"{r['recorded_ms']:.3f}", f"{r['model_ms']:.3f}", f"{err:+.0%}",
                     f"{r['walk_nodes']:,} on {len(r['walk_ranks'])} rank(s)",
                     f"rank {first['rank']}: {first['name']} ({first['share']:.0%})" if first else "")
    console.print(rows)


def _gpu_table(data: dict, console: Console) -> None:
    rows = sorted(data["gpu_timeline"], key=lambda t: t["busy_ms"] / t["total_ms"] if t["total_ms"] else 0.0)
    if not rows:
        return
    cols = ("rank", "busy", "total", "compute", "comm", "exposed", "idle")
    title = "GPU per rank, least busy first (ms; exposed: comm not overlapped)"
    if len(rows) > _GPU_ROWS:
        title += f"; {_GPU_ROWS} of {len(rows)}"
    out = table(title, cols, right=cols)
    for t in rows[:_GPU_ROWS]:
        busy = t["busy_ms"] / t["total_ms"] if t["total_ms"] else 0.0
        out.add_row(str(t["rank"]), f"{busy:.0%}", *(f"{t[k]:.1f}" for k in (
            "total_ms", "computation_ms", "comm_ms", "exposed_comm_ms", "idle_ms")))
    console.print(out)
