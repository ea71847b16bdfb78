"""Runs the evaluation suites by name over one case set: ``rootcause`` here, the others from their
modules (imported by name when asked for, so a suite not built yet says so)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.evals.rootcause import run_rootcause
from bottleneck_oracle.evals.types import Case, SuiteResult

__all__ = ["SUITES", "run_suites"]

SUITES = ("rootcause", "whatif", "optimize", "retrieval", "gnn", "latency", "questions")
# suite -> (module under bottleneck_oracle.evals, function)
_RUNNERS = {"whatif": ("whatif_suite", "run_whatif"), "optimize": ("optimize_suite", "run_optimize"),
            "retrieval": ("retrieval_suite", "run_retrieval"), "gnn": ("gnn_suite", "run_gnn"),
            "latency": ("latency", "run_latency"), "questions": ("questions_suite", "run_questions")}


def _runner(suite: str) -> Callable[..., SuiteResult]:
    module, function = _RUNNERS[suite]
    try:
        found = importlib.import_module(f"bottleneck_oracle.evals.{module}")
    except ModuleNotFoundError as e:
        if e.name != f"bottleneck_oracle.evals.{module}":
            raise
        raise ConfigError(f"suite {suite} is not built (no bottleneck_oracle.evals.{module})") from None
    if not hasattr(found, function):
        raise ConfigError(f"suite {suite} is not built (no {function} in bottleneck_oracle.evals.{module})")
    runner: Callable[..., SuiteResult] = getattr(found, function)
    return runner


def run_suites(cases: Sequence[Case], settings: Settings, suites: Sequence[str] = SUITES, *, llm: str = "offline",
               base_url: str | None = None,
               progress: Callable[[str, int, int], None] | None = None) -> dict[str, SuiteResult]:
    """Runs ``suites`` (in ``SUITES`` order) over ``cases``; ``latency`` reads the root-cause answers
    when ``rootcause`` runs too.

    Args:
        progress: called with (suite, done, total) as each suite goes.

    Raises:
        ConfigError: an unknown suite, or one whose module is not built.
    """
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ConfigError(f"unknown suite {unknown[0]!r}; use one of {', '.join(SUITES)}")
    runners = {s: run_rootcause if s == "rootcause" else _runner(s) for s in SUITES if s in suites}
    out: dict[str, SuiteResult] = {}
    for suite, runner in runners.items():
        tell = (lambda done, total, _s=suite: progress(_s, done, total)) if progress else None
        extra = {"rootcause": out.get("rootcause")} if suite == "latency" else {}
        out[suite] = runner(cases, settings, llm=llm, base_url=base_url, progress=tell, **extra)
    return out
