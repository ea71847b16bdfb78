"""``oracle whatif`` and ``oracle optimize``: what a change would buy a step, and what to change first."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bottleneck_oracle.cli._executor import ExecutorOption, RayAddressOption, settings_for
from bottleneck_oracle.cli._render import bar, middle, paragraph, print_json, spinner, stderr, stdout, table

if TYPE_CHECKING:
    from bottleneck_oracle.whatif.optimize import Plan
    from bottleneck_oracle.whatif.predict import WhatIfPrediction

__all__ = ["optimize_command", "whatif_command"]

_TRACE = typer.Argument(help="Trace files or a folder, or the id or name of a trace the workspace knows.")
_EDIT_HELP = ("A change, repeatable: 'scale SELECTOR xK', 'remove SELECTOR', 'set SELECTOR MS', 'fix CATEGORY', "
              "'data_parallel=D [global_batch]', 'microbatches=K [same_microbatch]'; SELECTOR is key=value "
              "of kind, name (regex), op (gemm, attention, allreduce, ...), rank, stream, step.")


def whatif_command(
    trace: Annotated[list[str], _TRACE],
    edit: Annotated[list[str], typer.Option(help=_EDIT_HELP)],
    step: Annotated[Optional[int], typer.Option(help="The step (N of ProfilerStep#N); default: the slowest.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    model: Annotated[bool, typer.Option(help="Also predict with the graph model (loads torch).")] = True,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Predict a step's time under edits, with each predictor, the one to trust, and the new critical path."""
    from bottleneck_oracle.workspace.whatif import whatif_trace

    with nullcontext() if as_json else spinner(stderr(), "predicting..."):
        result = whatif_trace(_ref(trace), edit, settings_for(executor, ray_address), step=step, model=model, partial=partial)
    if as_json:
        print_json(result.to_json())
        return
    _print_whatif(result)


def optimize_command(
    trace: Annotated[list[str], _TRACE],
    step: Annotated[Optional[int], typer.Option(help="The step (N of ProfilerStep#N); default: the slowest.")] = None,
    budget: Annotated[int, typer.Option(help="At most this many changes in the plan.")] = 3,
    verify: Annotated[bool, typer.Option(
        help="Run the job again with each step of the plan (re-simulate a synthetic job, re-capture a real "
             "one) and print predicted against measured.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    model: Annotated[bool, typer.Option(help="Also predict with the graph model (loads torch).")] = True,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Rank the changes that would speed a step up, by predicted gain, and plan the best few."""
    from bottleneck_oracle.workspace.whatif import optimize_trace

    settings = settings_for(executor, ray_address)
    if as_json:
        plan = optimize_trace(_ref(trace), settings, step=step, budget=budget, verify=verify,
                              model=model, partial=partial)
        print_json(plan.to_json())
        return
    with bar(stderr(), "optimizing") as progress:
        task = progress.add_task("", total=None)

        def tell(what: str, done: int, total: int) -> None:
            progress.update(task, description=what, completed=done, total=total)

        plan = optimize_trace(_ref(trace), settings, step=step, budget=budget, verify=verify,
                              model=model, partial=partial, progress=tell)
    _print_plan(plan)


def _ref(trace: list[str]) -> str | list[Path]:
    """One id or name, or the paths given."""
    return trace[0] if len(trace) == 1 and not Path(trace[0]).exists() else [Path(t) for t in trace]


def _print_whatif(r: WhatIfPrediction) -> None:
    from rich.markup import escape  # an edit's selector is a regex: its [...] is no markup

    console = stdout()
    edits = "; ".join(str(e) for e in r.edits)
    change = f"{r.gain_ms:.3f} ms saved" if r.gain_ms >= 0 else f"{-r.gain_ms:.3f} ms slower"
    console.print(f"[bold]step {r.step}[/] with {escape(edits)}: {r.best_ms:.3f} ms predicted ({r.chosen}) against "
                  f"{r.baseline_ms:.3f} ms recorded, {change}", highlight=False)
    shown = ", ".join(f"{name} {ms:.3f} ms" for name, ms in r.predicted_ms.items())
    lines = [f"predictors: {shown}", f"why {r.chosen}: {r.why}", *(f"assumes: {note}" for note in r.assumptions)]
    if r.interval is not None:
        lines.insert(1, f"interval: {r.interval.lo_ms:.3f} to {r.interval.hi_ms:.3f} ms, from "
                        + "; ".join(r.interval.sources))
    moved = r.moved()
    if moved.get("breakdown_delta_ms"):
        changes = ", ".join(f"{c} {d:+.3f} ms" for c, d in moved["breakdown_delta_ms"].items())  # type: ignore[union-attr]
        lines.append(f"critical path of rank {r.after.rank if r.after else '?'}: {changes}")
    for key, label in (("entered", "entered the path"), ("left", "left the path")):
        ops = moved.get(key) or []
        if ops:
            lines.append(f"{label}: " + ", ".join(f"{middle(o['op'], 48)} ({o['ms']:.3f} ms)"  # type: ignore[index]
                                                  for o in ops[:5]))  # type: ignore[index]
    for line in lines:
        paragraph(console, line, 2, hang=2)


def _print_plan(plan: Plan) -> None:
    console = stdout()
    console.print(f"[bold]step {plan.step}[/]: {plan.baseline_ms:.3f} ms recorded", highlight=False)
    t = table("candidates, best first", ("edit", "addresses", "predicted ms", "saves ms", "predictor"),
              right=("predicted ms", "saves ms"), wide=("edit", "addresses", "predictor"))
    for c in plan.candidates:
        p = c.prediction
        t.add_row(str(c.edit), c.category + (f" (+{', '.join(c.also)})" if c.also else ""),
                  f"{p.best_ms:.3f}" if p else "-", f"{p.gain_ms:.3f}" if p else "-", p.chosen if p else c.error)
    console.print(t)
    if not plan.plan:
        console.print("no change saves 1% of the step or more", highlight=False)
        return
    data = plan.to_json()["plan"]
    console.print("[bold]plan[/]")
    for i, (entry, chosen) in enumerate(zip(data, plan.plan), 1):  # type: ignore[arg-type]
        line = f"{i}. {entry['edit']}: {entry['predicted_ms']:.3f} ms ({entry['gain_ms']:.3f} ms saved)"
        if "measured_ms" in entry:
            measured = entry["measured_ms"]
            line += (f", measured {measured:.3f} ms ({entry['error_pct']:+.2f}% off)" if measured is not None
                     else ", not re-run")
        paragraph(console, line, 2, hang=3)
        for title in chosen.remedies[:3]:  # how to make the change, from the playbook
            paragraph(console, f"- {title}", 5, hang=2)
    if plan.verify_note:
        paragraph(console, f"not verified: {plan.verify_note}", 2, hang=2)
