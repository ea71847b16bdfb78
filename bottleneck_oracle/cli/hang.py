"""``oracle hang``: read a hung job's Flight Recorder dumps and name the rank everyone waits for."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bottleneck_oracle.cli._render import paragraph, print_json, ranks_text, stdout

__all__ = ["hang_command", "seq_grid"]

_COLUMNS = 12  # sequence numbers shown in the grid, the stuck one last but a few
_MARKS = {"done": "✓", "waiting": "…", "diverged": "✗", "absent": "·"}


def hang_command(
    dumps: Annotated[Path, typer.Argument(help="A folder of Flight Recorder dumps, one per rank "
                                               "(nccl_trace_rank_0, ...; pickle or JSON), or one of its files.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    prefix: Annotated[Optional[str], typer.Option(help="The dumps' file prefix (default: the most common one "
                                                       "in the folder).")] = None,
    traces: Annotated[Optional[str], typer.Option(help="Profiler traces of the same job (a folder, a file or a "
                                                       "trace the workspace knows): say what the culprit did in "
                                                       "its last profiled step.")] = None,
) -> None:
    """Why the job hangs: the collective it is stuck in, who waits, who never came, and where it began."""
    from bottleneck_oracle.config import Settings
    from bottleneck_oracle.workspace.hang import hang_report

    ref = None if traces is None else Path(traces) if Path(traces).exists() else traces
    report = hang_report(dumps, Settings.from_env(), prefix=prefix, traces=ref)
    if as_json:
        print_json(report)
    else:
        _print_text(report)


def _print_text(r: dict[str, Any]) -> None:
    console = stdout()
    head = {"hang": "HANG", "none": "NO HANG", "unknown": "UNKNOWN"}[r["verdict"]]
    paragraph(console, f"{head}: {r['explanation'][0]}", 0, hang=2)
    for line in r["explanation"][1:]:
        paragraph(console, line, 2, hang=2)
    by_line: dict[str, list[int]] = {}
    for rank, where in r["where"].items():
        by_line.setdefault(where, []).append(int(rank))
    for where, ranks in by_line.items():
        paragraph(console, f"{'rank' if len(ranks) == 1 else 'ranks'} {ranks_text(ranks)}: {where}", 2, hang=4)
    for step in r["next_steps"]:
        paragraph(console, f"next: {step}", 2, hang=4)
    for p in r.get("profiled", []):
        paragraph(console, _profiled_line(p), 2, hang=4)
    if r["collective"] is not None:
        group = r["collective"]["group"]
        console.print(f"\ngroup {group}, by rank (✓ done, … waiting, ✗ differs from the others, · not entered):",
                      highlight=False)
        for line in seq_grid(r, group):
            console.print(line, highlight=False, markup=False)
    if r["missing_dumps"]:
        paragraph(console, "no dump from rank(s) " + ", ".join(map(str, r["missing_dumps"])), 0)
    for skipped in r["skipped_files"]:
        paragraph(console, f"skipped {skipped['file']}: {skipped['reason']}", 0, hang=2)


def _profiled_line(p: dict[str, Any]) -> str:
    if p["step"] is None:
        return p["note"]
    ops = "; ".join(f"{o['op']} {o['ms']} ms" for o in p["top_ops"])
    found = f"; findings: {', '.join(p['findings'])}" if p["findings"] else ""
    return f"rank {p['rank']}, last profiled step {p['step']}: {p['wall_ms']} ms (longest on its path: {ops}){found}"


def seq_grid(r: dict[str, Any], group: str) -> list[str]:
    """The group's ranks as rows and its sequence numbers as columns, the stuck one marked by a caret."""
    stuck = r["collective"]["seq"]
    calls = {int(rank): {seq: (op, done) for seq, op, done, p2p in groups[group]["calls"] if not p2p}
             for rank, groups in r["ranks"].items() if group in groups}
    seqs = sorted({s for c in calls.values() for s in c})
    shown = [s for s in seqs if s <= stuck + 2][-_COLUMNS:]
    majority = {s: max((c[s][0] for c in calls.values() if s in c), key=lambda op: sum(
        1 for c in calls.values() if s in c and c[s][0] == op)) for s in shown}
    width = max(len(str(s)) for s in shown) + 1 if shown else 2
    lines = ["  rank " + "".join(f"{s:>{width}}" for s in shown)]
    for rank, c in sorted(calls.items()):
        marks = [_mark(c.get(s), majority[s]) for s in shown]
        lines.append(f"  {rank:>4} " + "".join(f"{m:>{width}}" for m in marks))
    lines.append("       " + "".join(f"{'^' if s == stuck else '':>{width}}" for s in shown))
    return lines


def _mark(call: tuple[str, bool] | None, expected: str) -> str:
    if call is None:
        return _MARKS["absent"]
    op, done = call
    return _MARKS["diverged"] if op != expected else _MARKS["done"] if done else _MARKS["waiting"]
