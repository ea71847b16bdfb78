"""``oracle diff``: did a change make the job faster, by how much, how sure, and what moved; a gate for CI."""

from __future__ import annotations

from contextlib import nullcontext
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bottleneck_oracle.cli._executor import ExecutorOption, RayAddressOption, settings_for
from bottleneck_oracle.cli._render import middle, paragraph, print_json, spinner, stderr, stdout, table
from bottleneck_oracle.errors import ConfigError

if TYPE_CHECKING:
    from bottleneck_oracle.workspace.diff import Compared

__all__ = ["GATE_EXIT", "diff_command"]

GATE_EXIT = 3  # NEW is slower than the gate allows (1: internal failure, 2: bad input)
_SECTIONS = (("categories", "category", "Critical-path attribution (ms per steady step)"),
             ("gpu", "field", "GPU timeline (ms per steady step)"),
             ("op_classes", "op_class", "Op classes (ms per steady step, all ranks)"),
             ("ops", "op", "Ops and kernels, by normalized name (ms per steady step, all ranks)"),
             ("critical_path", "op", "Critical path of the median step (ms)"))
_ROWS = 5


class Format(StrEnum):
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


def diff_command(
    runs: Annotated[list[str], typer.Argument(
        help="BASE NEW: trace folders or files, trace ids or names, or baseline:NAME; with --against, NEW only; "
             "with --save-baseline, the trace to save.")],
    gate: Annotated[Optional[float], typer.Option(
        metavar="PCT", help=f"Exit {GATE_EXIT} when NEW is slower than BASE by more than PCT % per steady step, "
                            "with at least 95% confidence (or with no spread to judge by, on the point "
                            "estimate).")] = None,
    output: Annotated[Format, typer.Option("--format", help="text for a person, json for a pipeline, markdown for "
                                                            "a pull request.")] = Format.TEXT,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (--format json).")] = False,
    against: Annotated[Optional[str], typer.Option(help="Compare against the saved baseline NAME.")] = None,
    save_baseline: Annotated[Optional[str], typer.Option(
        "--save-baseline", metavar="NAME", help="Save the trace given as baseline NAME, and compare nothing.")] = None,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
    steps_from: Annotated[Optional[str], typer.Option(
        "--steps-from", metavar="REGEX", help="Make matching user annotations the steps, as analyze does.")] = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Compare two runs: the verdict and its confidence, how comparable they are, and what moved."""
    from bottleneck_oracle.workspace.diff import diff_traces
    from bottleneck_oracle.workspace.diff import save_baseline as save

    settings = settings_for(executor, ray_address)
    output = Format.JSON if as_json else output
    if save_baseline is not None:
        if len(runs) != 1 or against:
            raise ConfigError("--save-baseline NAME takes one trace and no --against")
        resolved = save(save_baseline, _ref(runs[0]), settings, partial=partial, steps_from=steps_from)
        stderr().print(f"baseline {save_baseline}: {resolved.entry.name} ({resolved.entry.trace_id})", highlight=False)
        return
    if against is not None:
        runs = [f"baseline:{against}", *runs]
    if len(runs) != 2:
        raise ConfigError(f"oracle diff takes BASE and NEW (or NEW with --against NAME), got {len(runs)} trace(s)")
    with spinner(stderr(), "comparing...") if output == Format.TEXT else nullcontext():
        compared = diff_traces(_ref(runs[0]), _ref(runs[1]), settings, partial=partial, steps_from=steps_from)
    if output == Format.JSON:
        print_json(compared.to_json())
    elif output == Format.MARKDOWN:
        print(markdown(compared))
    else:
        _print_text(compared)
    if gate is not None and gated(compared, gate):
        stderr().print(f"gate: NEW is slower than BASE by more than {gate:g}% (exit {GATE_EXIT})", highlight=False)
        raise typer.Exit(GATE_EXIT)


def gated(compared: Compared, pct: float) -> bool:
    """Whether NEW is slower than BASE by more than ``pct`` %, at 95% confidence where the spread tells."""
    d = compared.diff
    if d.verdict != "slower" or d.delta_pct <= pct:
        return False
    sure = d.slower_than(pct)
    return sure is None or sure >= 0.95


def _ref(text: str) -> str | Path:
    return Path(text) if Path(text).exists() else text


def _names(compared: Compared) -> tuple[str, str]:
    return compared.base.entry.name, compared.new.entry.name


def _steps_line(label: str, run: dict) -> str:
    aside = [f"{what} {', '.join(map(str, run[key]))}" for key, what in
             (("warmup", "warm-up"), ("outliers", "outliers"), ("partial", "partial")) if run[key]]
    median = f"median {run['median_ms']} ms" if run["median_ms"] is not None else "no complete step"
    return (f"{label}: {len(run['steady'])} steady step(s) of {len(run['steps'])}, {median}"
            + (f" (set aside: {'; '.join(aside)})" if aside else ""))


def _print_text(compared: Compared) -> None:
    d, console = compared.diff, stdout()
    base, new = _names(compared)
    console.print(f"[bold]{d.headline()}[/]", highlight=False)
    paragraph(console, f"BASE {base} → NEW {new}", 2, hang=2)
    c = d.comparability
    paragraph(console, f"comparability: {c['level']}" + (f" ({'; '.join(c['reasons'])})" if c["reasons"] else ""),
              0, hang=2)
    cause, verdicts = _cause_lines(compared)
    for line in [*cause, _steps_line("BASE", d.base), _steps_line("NEW", d.new), *verdicts]:
        paragraph(console, line, 0, hang=2)
    name_width = max(console.width - 34, 16)  # three numbers of up to 8 characters and the gaps beside
    for key, label, title in _SECTIONS:
        rows = d.moved.get(key, [])[:_ROWS]
        if rows:
            t = table(title, (label, "base", "new", "change"), right=("base", "new", "change"))
            for r in rows:
                t.add_row(middle(str(r[label]), name_width), f"{r['base_ms']:.3f}", f"{r['new_ms']:.3f}",
                          f"{r['delta_ms']:+.3f}")
            console.print(t)
    for line in _other_moves(d.moved) + _whatif_line(compared):
        paragraph(console, line, 0, hang=2)


def _cause_lines(compared: Compared, code: bool = False) -> tuple[list[str], list[str]]:
    """The cause of the change (none when unchanged), and what bounds each run; ``code``: the runs' names
    as markdown code spans."""
    cause = compared.cause()
    base, new = (f"`{_cell(n)}`" for n in _names(compared)) if code else _names(compared)
    return ([f"cause: {cause['words']}"] if cause else [],
            [f"{label} {name}: {v.headline()}" for label, name, v in
             (("BASE", base, compared.base_verdict), ("NEW", new, compared.new_verdict)) if v is not None])


def _whatif_line(compared: Compared) -> list[str]:
    """The edit that takes the slower run to the faster one, and how close the replay came."""
    from bottleneck_oracle.workspace.diff_whatif import CLOSE_PCT

    w = compared.whatif
    if not w:
        return []
    slow, fast = (compared.new, compared.base) if w["applied_to"] == "new" else (compared.base, compared.new)
    return [f"what-if: `{w['edit']}` applied to {w['applied_to'].upper()} ({slow.entry.name}) predicts "
            f"{w['predicted_ms']:g} ms a step against {w['target_ms']:g} ms measured for {w['predicts'].upper()} "
            f"({fast.entry.name}): {w['error_pct']:+g}%" + ("" if w["close"] else f" (no candidate came within "
                                                           f"{CLOSE_PCT:g}%: the difference is not one edit)")]


def _other_moves(moved: dict) -> list[str]:
    """Collectives, findings and ranks, a line each."""
    out = [f"collective {c['collective']}: {c['base_count']:g} → {c['new_count']:g} a step, {c['base_ms']:.3f} → "
           f"{c['new_ms']:.3f} ms ({c['delta_ms']:+.3f})" for c in moved.get("collectives", [])[:_ROWS]]
    out += [f"finding {f['category']} on rank(s) {','.join(map(str, f['ranks']))}: {f['change']} "
            f"({f['base_ms']:g} → {f['new_ms']:g} ms)" for f in moved.get("findings", [])[:_ROWS]]
    out += [f"rank {r['rank']}: {r['base_ms']:g} → {r['new_ms']:g} ms a step ({r['delta_ms']:+g}, the other ranks "
            f"{r['others_delta_ms']:+g})" for r in moved.get("ranks", [])[:_ROWS]]
    return out


def _cell(name: str) -> str:
    """A trace's op name inside a table cell's code span: data, never markup."""
    return middle(name, 60).replace("`", "'").replace("|", "\\|").replace("\n", " ")


def markdown(compared: Compared) -> str:
    """The comparison as a report to paste into a pull request."""
    d = compared.diff
    base, new = _names(compared)
    c = d.comparability
    cause, verdicts = _cause_lines(compared, code=True)
    lines = [f"### oracle diff: {d.headline()}", "",
             f"BASE `{base}` → NEW `{new}`. Comparability: **{c['level']}**"
             + (f" ({'; '.join(c['reasons'])})" if c["reasons"] else "") + ".", "",
             *(f"- {line}" for line in [*cause, _steps_line("BASE", d.base), _steps_line("NEW", d.new), *verdicts]),
             ""]
    movers = [(title.split(" (")[0], str(r[label]), r) for key, label, title in _SECTIONS
              for r in d.moved.get(key, [])[:_ROWS]]
    if movers:
        lines += ["| what | name | base ms | new ms | change ms |", "|---|---|---:|---:|---:|"]
        lines += [f"| {what} | `{_cell(name)}` | {r['base_ms']:.3f} | {r['new_ms']:.3f} | {r['delta_ms']:+.3f} |"
                  for what, name, r in movers]
        lines.append("")
    lines += [f"- {line}" for line in _other_moves(d.moved) + _whatif_line(compared)]
    return "\n".join(lines).rstrip() + "\n"
