"""``oracle analyze``: the execution graph, each step's critical path, and why the slow steps are slow."""

from __future__ import annotations

import re
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bottleneck_oracle.cli._executor import ExecutorOption, RayAddressOption, settings_for
from bottleneck_oracle.cli._render import (
    CATEGORY_SHORT,
    brief,
    middle,
    paragraph,
    print_json,
    ranks_text,
    spinner,
    stderr,
    stdout,
    table,
)

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["analyze_command", "print_findings", "print_why_slowest"]

_AT = re.compile(r"^rank \d+(?: step -?\d+)?: ")  # a finding's evidence opens with where it is
_INDENT = 14  # a finding's evidence lines up under its category


def analyze_command(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or folders (one file per rank; .json or .json.gz).")],
    step: Annotated[Optional[int], typer.Option(
        help="Report only this step (N of ProfilerStep#N, or its index with --steps-from).")] = None,
    rank: Annotated[Optional[int], typer.Option(help="Report only this rank.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    overlay: Annotated[Optional[Path], typer.Option(help="Write a Perfetto trace with the critical path marked.")] = None,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
    steps_from: Annotated[Optional[str], typer.Option(
        "--steps-from", metavar="REGEX", help="Make the user annotations (record_function ranges) whose name "
        "matches REGEX the steps, numbered 0, 1, ... per rank, instead of ProfilerStep#N.")] = None,
    full_paths: Annotated[bool, typer.Option(
        help="With --json, give every step's whole critical path (as columns), not only its top contributors.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Print each finding's evidence in full (--json has it too).")] = False,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Build the execution graph, find each step's critical path, and explain the slow steps."""
    from bottleneck_oracle.analysis.analysis import analyze
    from bottleneck_oracle.analysis.overlay import write_overlay
    from bottleneck_oracle.analysis.report import analysis_to_dict
    from bottleneck_oracle.executor import executor_of
    from bottleneck_oracle.traces import read_trace
    from bottleneck_oracle.whatif.run_verdict import run_verdict

    settings = settings_for(executor, ray_address)
    err = stderr()
    status = (lambda _: nullcontext()) if as_json else (lambda what: spinner(err, what))  # --json: no rich
    with status("reading traces..."):
        trace = read_trace(paths, partial=partial, executor=executor_of(settings))
    with status("analysing..."):
        a = analyze(trace, steps_from=steps_from)
    data = analysis_to_dict(a, step=step, rank=rank, full_paths=full_paths and as_json)
    data["run_verdict"] = run_verdict(a).to_json()
    if overlay is not None:
        marked = write_overlay(a, overlay, step=step, rank=rank)
        err.print(f"overlay: {overlay} ({marked} critical nodes marked; open it in ui.perfetto.dev)", highlight=False)
    if as_json:
        print_json(data)
        return
    console = stdout()
    t = data["trace"]
    paragraph(console, f"{len(t['ranks'])} rank(s), {t['events']:,} events, {t['nodes']:,} nodes, {t['edges']:,} "
              f"edges; {t['collectives_matched']} of {t['collectives']} collectives matched across ranks"
              + _steps_line(t), indent=0)
    for note in t["health"]:  # what the trace cannot support (skipped events among them)
        paragraph(console, note["message"])
    _gpu_table(data, console, verbose)
    _steps_table(data, console)
    paragraph(console, "Run: " + data["run_verdict"]["headline"], indent=0)
    print_findings(data, console, verbose)
    print_why_slowest(data, console, verbose)


def _gpu_table(data: dict, console: Console, verbose: bool) -> None:
    """The GPU timeline of each rank over the trace, then what the GPU-bound steps are bound by."""
    if data["gpu_timeline"]:
        cols = ("rank", "busy", "total", "compute", "comm", "exposed", "memcpy", "idle")
        rows = table("GPU per rank (ms; exposed: communication not overlapped)", cols, right=cols)
        for t in data["gpu_timeline"]:
            busy = t["busy_ms"] / t["total_ms"] if t["total_ms"] else 0.0
            rows.add_row(str(t["rank"]), f"{busy:.0%}", *(f"{t[k]:.1f}" for k in (
                "total_ms", "computation_ms", "comm_ms", "exposed_comm_ms", "memcpy_ms", "idle_ms")))
        console.print(rows)
    for b in data["gpu_bound"][:4]:
        paragraph(console, b["evidence"] if verbose else brief(b["evidence"], console.width - 2))


def _steps_line(t: dict) -> str:
    if t["steps_from"]:
        return f"; steps: user annotations matching {t['steps_from']!r}"
    return ""  # a trace without steps says so in its health notes


def _steps_table(data: dict, console: Console) -> None:
    from bottleneck_oracle.graph.types import CATEGORIES

    with_gpu = any(s.get("gpu") for s in data["steps"])  # a busy column only where a GPU recorded work
    shown = [c.value for c in CATEGORIES if any(s["breakdown_ms"][c.value] >= 0.05 for s in data["steps"])]
    columns = ("step", "rank", "wall", *(CATEGORY_SHORT[c] for c in shown), *(("gpu%",) if with_gpu else ()))
    title = "Steps: wall time and where it went (ms, critical path" + ("; gpu%: GPU busy)" if with_gpu else ")")
    steps = table(title, (*columns, ""), right=columns)
    for s in data["steps"]:
        mark = "[bold red]slow[/]" if s["slow"] else ("partial" if s["partial"] else "")
        cells = [f"{s['breakdown_ms'][c]:.1f}" for c in shown]
        if with_gpu:
            gpu = s.get("gpu")
            cells.append(f"{100 * gpu['busy_ms'] / gpu['total_ms']:.0f}" if gpu and gpu["total_ms"] else "-")
        steps.add_row(str(s["step"]), str(s["rank"]), f"{s['wall_ms']:.1f}", *cells, mark)
    if data["steps"]:
        console.print(steps)
    zero = [CATEGORY_SHORT[c.value] for c in CATEGORIES if c.value not in shown]
    if data["steps"] and zero:
        console.print(f"  (0.0 in every step, left out: {', '.join(zero)})", highlight=False)


def print_findings(data: dict, console: Console, verbose: bool) -> None:
    """The major findings (a step's cause first, the waits it made folded beneath), then a few minor ones:
    of ``analyze --json`` or ``scan --json``."""
    major = [f for f in data["findings"] if f["severity"] == "major"]
    minor = [f for f in data["findings"] if f["severity"] != "major"]
    run = data.get("run_verdict")
    if not major and any(n["code"] == "untraced_wait" for n in data.get("trace", {}).get("health", [])):
        console.print("No bottleneck found in what the trace shows: its GPU waited for something outside it "
                      "(the note above).")
    elif not major and run and run["verdict"] != "gpu-bound":
        console.print("No finding: no step stands out and no category a fix removes dominates (the run's verdict "
                      "above).")
    elif not major and (data["gpu_bound"] or run):
        console.print("No host-side or communication bottleneck: the GPU itself is (GPU-bound, above).")
    elif not major:
        console.print("No bottleneck found: no step stands out and no category dominates.")
    else:
        shown, folded = _fold_waits(major) if not verbose else (major, {})
        _print_findings(console, "Findings, largest impact first" + ("" if verbose else " (-v: all the evidence)"),
                        (shown if verbose else _alike_joined(shown))[:15], verbose, folded)
    if minor:
        _print_findings(console, "Minor: in steps that are not slow (not their cause)",
                        (minor if verbose else _alike_joined(minor))[:5], verbose)


def _print_findings(console: Console, title: str, findings: list[dict], verbose: bool,
                    folded: dict[int, list[dict]] | None = None) -> None:
    """One line per finding (impact, category, step, ranks), its evidence's first clause beneath, and
    beneath a cause the waits folded into it."""
    console.print(f"[bold]{title}[/]", highlight=False)
    wide = max(len(f["category"]) for f in findings)
    for f in findings:
        step = "all steps" if f["step"] is None else f"step {f['step']}"
        head = f"{f['impact_ms']:9.1f} ms  {f['category']:<{wide}}  {step:<9}  "
        ranks = ("rank " if len(f["ranks"]) == 1 else "ranks ") + ranks_text(f["ranks"])
        console.print(head + middle(ranks, max(console.width - len(head), 10)), markup=False, highlight=False)
        paragraph(console, _evidence(f["evidence"], console.width - _INDENT, verbose), _INDENT)
        if (folded or {}).get(id(f)):
            paragraph(console, _waits_text(folded[id(f)]), _INDENT)


_WAITS = ("pipeline_bubble", "exposed_communication")


def _fold_waits(findings: list[dict]) -> tuple[list[dict], dict[int, list[dict]]]:
    """The findings with the waits a step's cause made (the GPUs idle for it, the collectives exposed
    by it in that step) taken out, and per cause (by ``id``) the waits it made."""
    causes = {f["step"]: f for f in findings if f.get("cause") and f["category"] not in _WAITS}
    folded: dict[int, list[dict]] = {}
    shown = []
    for f in findings:
        cause = causes.get(f["step"])
        if cause is not None and f is not cause and f["category"] in _WAITS:
            folded.setdefault(id(cause), []).append(f)
        else:
            shown.append(f)
    return shown, folded


def _alike_joined(findings: list[dict]) -> list[dict]:
    """One line for the findings of one category and step on several ranks (a 64-rank job's 64 pipeline
    bubbles): the largest's impact and evidence, with every rank; a step's cause stays alone."""
    out: list[dict] = []
    at: dict[tuple, dict] = {}
    for f in findings:
        key = (f["category"], f["step"])
        if f.get("cause"):
            out.append(f)
        elif key in at:
            at[key]["ranks"] = sorted({*at[key]["ranks"], *f["ranks"]})
        else:
            at[key] = dict(f)
            out.append(at[key])
    return out


def _waits_text(waits: list[dict]) -> str:
    """``+ waits it made: pipeline_bubble on ranks 0-4, 6-15 (149.7-150.0 ms each)...``"""
    parts = []
    for category in dict.fromkeys(w["category"] for w in waits):
        mine = [w for w in waits if w["category"] == category]
        ranks = sorted({r for w in mine for r in w["ranks"]})
        low, high = min(w["impact_ms"] for w in mine), max(w["impact_ms"] for w in mine)
        size = f"{high:.1f} ms" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f} ms"
        parts.append(f"{category} on rank{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)} ({size})")
    return "+ the waits it made (-v: each): " + "; ".join(parts)


def _evidence(text: str, width: int, verbose: bool) -> str:
    """A finding's evidence: all of it with ``--verbose``, else its first clause in ``width``,
    without the "rank R step S: " its line already says."""
    return text if verbose else brief(_AT.sub("", text), width)


def print_why_slowest(data: dict, console: Console, verbose: bool) -> int | None:
    """Why the slowest step is slow: its cause, the rank's median, GPU-bound or not, its findings and the
    largest items of its critical path (of ``analyze --json`` or ``scan --json`` with the paths). Returns the
    step it spoke of (None: no step)."""
    from bottleneck_oracle.analysis.report import cause_text

    if not data["steps"]:
        return None
    slowest = max(data["steps"], key=lambda s: s["wall_ms"] if not s["partial"] else -1)
    step, rank = slowest["step"], slowest["rank"]
    label = "the whole trace" if step < 0 else f"step {step}"
    median = slowest["median_ms"]
    if median is not None and not slowest["slow"]:
        ratio = f"{slowest['wall_ms'] / median:.2f}x" if median > 0 else "against"  # empty steps have a 0 median
        console.print(f"\n[bold]{label.capitalize()} is not slow[/]: {slowest['wall_ms']:.1f} ms on rank {rank}, "
                      f"{ratio} the median {median:.1f} ms of the rank's other steps")
        return step
    major = [f for f in data["findings"] if f["severity"] == "major"]
    reasons = [f for f in major if f["step"] == step] or [f for f in major if f["step"] is None]
    cause = next((f for f in reasons if f.get("cause")), None)  # findings/cause.py: on the rank that delayed it
    if cause is not None:  # the rank explained is the one that delayed the step, not the longest
        slowest = next((s for s in data["steps"] if (s["step"], s["rank"]) == (step, cause["ranks"][0])), slowest)
        rank, median = slowest["rank"], slowest["median_ms"]
        reasons = [cause] + [f for f in reasons if f is not cause]
    console.print(f"\n[bold]Why is {label} slow?[/] (rank {rank}, {slowest['wall_ms']:.1f} ms)")
    if median is not None:
        console.print(f"  the rank's other steps take {median:.1f} ms (median)")
    if cause is not None:
        paragraph(console, "- cause: " + cause_text(cause))
    bound = [b for b in data["gpu_bound"] if b["rank"] == rank and b["step"] in (step, None)]
    for b in bound[:1]:
        paragraph(console, "- " + (b["evidence"] if verbose else brief(b["evidence"], console.width - 4)))
    shown, folded = _fold_waits(reasons) if not verbose else (reasons, {})
    for f in shown[:3]:
        lead = f"- {f['category']}: "
        paragraph(console, lead + _evidence(f["evidence"], console.width - 2 - len(lead), verbose))
        if folded.get(id(f)):
            paragraph(console, "  " + _waits_text(folded[id(f)]))
    console.print("  largest items on its critical path:")
    for e in slowest["top_contributors"][:5]:
        line = f"    {e['contrib_us'] / 1000:8.2f} ms  {e['category']:<15} rank {e['rank']}  "
        console.print(line + middle(e["name"], max(console.width - len(line), 16)), markup=False, highlight=False)
    return step
