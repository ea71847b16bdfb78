"""``oracle eval``: the evaluation harness's suites over a case set, a report written for people and
machines, two reports compared (exit 1 on a regression), and the default case set made."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer

from bottleneck_oracle.cli._render import bar, print_json, stderr, stdout
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError

__all__ = ["compare_command", "eval_app", "make_cases_command", "run_command"]

eval_app = typer.Typer(name="eval", invoke_without_command=True,
                       help="Score the oracle on cases with known answers; compare two reports.")

_SUITE = typer.Option("--suite", help="A suite to run, repeatable: rootcause, whatif, optimize, retrieval, gnn, "
                                      "latency, questions; default: all.")
_LLM = typer.Option("--llm", help="'offline' (the default planner, no network) or 'openai:MODEL'.")
_BASE_URL = typer.Option("--base-url", help="An OpenAI-compatible server (vLLM, Ollama, llama.cpp): its /v1 URL.")
_CASES = typer.Option("--cases", help="A folder of case files (*.yaml; a missing trace is made from its recipe); "
                                      "default: the default set under the "
                                      "workspace ($ORACLE_HOME/eval-cases), made on first use.")
_REPORT = typer.Option("--report", help="The report folder to write (report.json, report.md, PNGs); default: "
                                        "$ORACLE_HOME/eval-report.")


@contextmanager
def _progress(what: str, quiet: bool) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr fed with (done, total) or (item, done, total); silent when ``quiet``."""
    if quiet:
        yield lambda *args: None
        return
    with bar(stderr(), what) as progress:
        task = progress.add_task("", total=None)

        def tell(*args: object) -> None:
            *item, done, total = args
            progress.update(task, completed=done, total=total, description=str(item[0]) if item else "")

        yield tell


def _default_cases(settings: Settings, quiet: bool) -> Path:
    """The default case set's case folder under the workspace, made by ``make_cases`` when absent."""
    from bottleneck_oracle.evals.make_cases import make_cases

    root = settings.home / "eval-cases"
    if not any((root / "cases").glob("*.yaml")):
        with _progress("making the default cases", quiet) as tell:
            make_cases(root, workers=settings.workers, progress=tell)
    return root / "cases"


def run_command(
    ctx: typer.Context,
    suite: Annotated[Optional[list[str]], _SUITE] = None,
    llm: Annotated[str, _LLM] = "offline",
    base_url: Annotated[Optional[str], _BASE_URL] = None,
    cases: Annotated[Optional[Path], _CASES] = None,
    report: Annotated[Optional[Path], _REPORT] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report's JSON document on stdout.")] = False,
) -> None:
    """Run the suites over a case set and write the report (the default command of `oracle eval`)."""
    if ctx.invoked_subcommand is not None:  # `oracle eval compare ...`: the group's own flags are unused
        return
    from bottleneck_oracle.evals.cases import load_cases
    from bottleneck_oracle.evals.report import REPORT_MD, read_report, write_report
    from bottleneck_oracle.evals.run import SUITES, run_suites

    chosen = tuple(suite) if suite else SUITES
    unknown = [s for s in chosen if s not in SUITES]
    if unknown:  # before the default cases are made
        raise ConfigError(f"unknown suite {unknown[0]!r}; use one of {', '.join(SUITES)}")
    settings = Settings.from_env()
    folder = cases if cases is not None else _default_cases(settings, as_json)
    with _progress("reading cases", as_json) as tell:
        loaded = load_cases(folder, make=True, workers=settings.workers, progress=tell)
    start = time.perf_counter()
    with _progress("evaluating", as_json) as tell:
        results = run_suites(loaded, settings, chosen, llm=llm, base_url=base_url, progress=tell)
    meta = {"llm": llm, "base_url": base_url, "cases": str(folder), "n_cases": len(loaded),
            "graph_url": settings.graph_url, "seconds": round(time.perf_counter() - start, 1)}
    out = write_report(results, report if report is not None else settings.home / "eval-report", meta=meta)
    if as_json:
        print_json(read_report(out))
        return
    stdout(soft_wrap=True).print((out / REPORT_MD).read_text(), markup=False, highlight=False)
    stderr().print(f"report written to {out}", highlight=False, soft_wrap=True)


@eval_app.command("compare")
def compare_command(
    old: Annotated[Path, typer.Argument(help="The reference report folder (written by `oracle eval --report`).")],
    new: Annotated[Path, typer.Argument(help="The report folder under test.")],
    tolerance: Annotated[float, typer.Option(
        help="How far a metric may move the wrong way unflagged: absolute for rates, relative above 1.")] = 0.01,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Compare two reports metric by metric and case by case; exit 1 on any regression."""
    from bottleneck_oracle.evals.compare import compare_reports
    from bottleneck_oracle.evals.report import read_report

    found = compare_reports(read_report(old), read_report(new), tolerance=tolerance)
    if as_json:
        print_json({"has_regression": found.has_regression,
                    "regressions": [dict(zip(("suite", "metric", "old", "new"), r)) for r in found.regressions],
                    "improvements": [dict(zip(("suite", "metric", "old", "new"), r)) for r in found.improvements],
                    "case_regressions": [{"suite": s, "case": c} for s, c in found.case_regressions],
                    "case_fixes": [{"suite": s, "case": c} for s, c in found.case_fixes],
                    "missing": found.missing})
    else:
        stdout(soft_wrap=True).print(found.to_markdown(), markup=False, highlight=False)
    if found.has_regression:
        raise typer.Exit(1)


@eval_app.command("make-cases")
def make_cases_command(
    out: Annotated[Path, typer.Argument(help="The folder to write (cases/*.yaml and traces/).")],
    large: Annotated[bool, typer.Option(help="Also more seeds and real CPU captures (needs torch, minutes).")] = False,
) -> None:
    """Make the default case set (synthetic GPU jobs with every fault, clean seeds, the shipped capture)."""
    from bottleneck_oracle.evals.make_cases import make_cases

    settings = Settings.from_env()
    with _progress("making cases", False) as tell:
        made = make_cases(out, large=large, workers=settings.workers, progress=tell)
    stdout(soft_wrap=True).print(f"{out}: {len(made)} cases in {out / 'cases'}, traces in {out / 'traces'}; "
                                 f"run them with `oracle eval --cases {out / 'cases'}`", highlight=False)


eval_app.command("run")(run_command)
eval_app.callback()(run_command)
