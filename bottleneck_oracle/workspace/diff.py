"""Two runs compared (``analysis/diff.py``), resolved as every command resolves a trace, and named baselines.

The CLI's ``oracle diff``, the agent's ``compare_runs`` tool and the HTTP API call ``diff_traces``. The
comparison carries each run's verdict (``whatif/run_verdict.py``) and the cause of the change: the
attribution category that moved most in the verdict's direction, with the finding of that category that
appeared, went away, grew or shrank with it. A baseline is a name for a trace the workspace knows
(``baselines.json`` in the workspace): a CI job saves one from its main branch and compares each change
against it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from bottleneck_oracle.analysis.diff import RunDiff, diff_runs
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.whatif.run_verdict import GROUPS, LAUNCH_BOUND_GROUPS, RunVerdict, run_verdict
from bottleneck_oracle.workspace.diff_whatif import SYMPTOMS, whatif_between
from bottleneck_oracle.workspace.traces import Resolved, atomic_write, open_trace

__all__ = ["BASELINES_NAME", "Compared", "baselines", "cause_of", "diff_traces", "resolve_baseline", "save_baseline"]

_BRIEF = 3  # movers of each kind in the agent's brief

BASELINES_NAME = "baselines.json"


def _findings_of() -> dict[str, tuple[str, ...]]:
    """The findings behind each attribution category: those whose fix removes its group
    (``whatif/run_verdict.py``; a launch-overhead finding's fix takes CPU ops too)."""
    out: dict[str, dict[str, None]] = {}
    for groups in (GROUPS, LAUNCH_BOUND_GROUPS):
        for cats, found in groups.values():
            for c in cats:
                out.setdefault(c, {}).update(dict.fromkeys(str(f) for f in found))
    return {c: tuple(found) for c, found in out.items()}


_FINDINGS_OF = _findings_of()
_WORSE = {"slower": ("appeared", "grew"), "faster": ("went away", "shrank")}  # NEW's findings, by verdict
_WORDS = {"data_loading": "data loading", "gpu_compute": "GPU compute", "cpu": "host (CPU) work",
          "launch_overhead": "kernel launch overhead", "communication": "exposed communication",
          "sync_wait": "synchronisation wait", "idle": "idle time", "untraced_wait": "the GPU's wait on untraced work"}


def _ms(value: float) -> str:
    """Milliseconds to one decimal, without a trailing zero: 58.816 -> 58.8, 0.0 -> 0."""
    return f"{round(float(value), 1) + 0.0:.1f}".removesuffix(".0")  # + 0.0: no "-0"


def _finding_behind(diff: RunDiff, category: str, edit: str) -> dict[str, Any] | None:
    """The finding of ``category``'s group that moved with the verdict: the what-if's fix first, symptoms
    (a rank late because of something else) last, then the largest move."""
    moved = [f for f in diff.moved.get("findings", [])
             if f["category"] in _FINDINGS_OF.get(category, ()) and f["change"] in _WORSE[diff.verdict]]
    moved.sort(key=lambda f: (edit != f"fix {f['category']}", f["category"] in SYMPTOMS, -abs(f["delta_ms"])))  # type: ignore[arg-type]
    return moved[0] if moved else None


def cause_of(diff: RunDiff, whatif: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What made NEW slower or faster: the attribution category whose median critical-path time moved most
    in the verdict's direction, and the finding behind it (of that category, appeared or went away, or
    grown or shrunk, with the change); None when the verdict is ``unchanged`` (a move within the noise
    is no cause: the tables still list it) or no category moved that way.

    Returns:
        ``{category, base_ms, new_ms, delta_ms, finding, change, ranks, finding_base_ms, finding_new_ms,
        words}`` (ms per steady step; ``finding``, ``change`` and ``ranks`` None without a finding).
    """
    if diff.verdict not in _WORSE:
        return None
    sign = 1.0 if diff.verdict == "slower" else -1.0
    top = next((m for m in diff.moved.get("categories", []) if sign * float(m["delta_ms"]) > 0), None)  # type: ignore[arg-type]
    if top is None:
        return None
    category = str(top["category"])
    f = _finding_behind(diff, category, str((whatif or {}).get("edit", "")))
    words = (f"{_WORDS.get(category, category)} {'rose' if sign > 0 else 'fell'} from {_ms(top['base_ms'])} to "  # type: ignore[arg-type]
             f"{_ms(top['new_ms'])} ms a step")  # type: ignore[arg-type]
    if f is None:
        words += "; no finding of it appeared or went away"
    else:
        many = max(int(diff.base.get("ranks", 1)), int(diff.new.get("ranks", 1))) > 1  # type: ignore[call-overload]
        where = f" on rank(s) {','.join(map(str, f['ranks']))}" if many else ""  # type: ignore[call-overload]
        how = f" ({_ms(f['base_ms'])} to {_ms(f['new_ms'])} ms a step)" if f["change"] in ("grew", "shrank") else ""  # type: ignore[arg-type]
        words += f": the {f['category']} finding{where} {f['change']}{how}"
    return {"category": category, "base_ms": top["base_ms"], "new_ms": top["new_ms"], "delta_ms": top["delta_ms"],
            "finding": f["category"] if f else None, "change": f["change"] if f else None,
            "ranks": f["ranks"] if f else None, "finding_base_ms": f["base_ms"] if f else None,
            "finding_new_ms": f["new_ms"] if f else None, "words": words}


def _verdict_brief(v: RunVerdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    c = v.cause
    return {"verdict": v.verdict, "headline": v.headline(), "gpu_busy_pct": v.gpu_busy_pct,
            "cause": c.name if c else None, "exposed_ms": c.exposed_ms if c else None,
            "saving_ms": c.saving_ms if c else None}


@dataclass(frozen=True, slots=True)
class Compared:
    """The comparison of NEW against BASE, with the two traces it was made from and each run's verdict."""

    diff: RunDiff
    base: Resolved
    new: Resolved
    whatif: dict[str, Any] | None = None  # the edit that takes the slower run to the faster (diff_whatif.py)
    base_verdict: RunVerdict | None = None  # what bounds each run (whatif/run_verdict.py)
    new_verdict: RunVerdict | None = None

    def to_json(self) -> dict[str, object]:
        return {"base_trace": self.base.entry.to_json(), "new_trace": self.new.entry.to_json(), **self.diff.to_json(),
                "cause": self.cause(), "whatif": self.whatif,
                "base_verdict": self.base_verdict.to_json() if self.base_verdict else None,
                "new_verdict": self.new_verdict.to_json() if self.new_verdict else None}

    def cause(self) -> dict[str, Any] | None:
        """What made the difference (``cause_of``): the largest mover of the critical-path attribution in
        the verdict's direction, with the finding behind it."""
        return cause_of(self.diff, self.whatif)

    def brief(self) -> dict[str, Any]:
        """The comparison in a few hundred characters of JSON: the verdict, how sure, how comparable,
        the cause, the top movers and each run's verdict (the agent's ``compare_runs`` tool)."""
        d = self.diff
        moved = {k: d.moved.get(k, [])[:_BRIEF] for k in ("categories", "ops", "findings", "collectives", "ranks")}
        runs = {f"{side}_verdict": _verdict_brief(v) for side, v in (("base", self.base_verdict),
                                                                     ("new", self.new_verdict))}
        return {"base": self.base.entry.name, "new": self.new.entry.name, "verdict": d.verdict,
                "headline": d.headline(), "delta_ms": d.delta_ms, "delta_pct": d.delta_pct,
                "interval_pct": list(d.interval_pct), "confidence": d.confidence,
                "confidence_pct": None if d.confidence is None else round(100 * d.confidence),
                "base_median_ms": d.base["median_ms"], "new_median_ms": d.new["median_ms"],
                "comparability": {k: d.comparability[k] for k in ("level", "reasons")}, "cause": self.cause(),
                "moved": moved, "whatif": self.whatif, **runs}


def diff_traces(base: str | Path | Sequence[Path], new: str | Path | Sequence[Path], settings: Settings, *,
                partial: bool = False, steps_from: str | None = None) -> Compared:
    """NEW against BASE, each a path (or paths), a trace id or name, or ``baseline:NAME``.

    Raises:
        ConfigError: a trace or baseline that is not there. TraceFormatError: a file that is not a trace.
    """
    a = open_trace(resolve_baseline(base, settings), settings, partial=partial, steps_from=steps_from)
    b = open_trace(resolve_baseline(new, settings), settings, partial=partial, steps_from=steps_from)
    diff = diff_runs(a.analysis, b.analysis)
    return Compared(diff, a, b, whatif_between(diff, a.analysis, b.analysis), run_verdict(a.analysis),
                    run_verdict(b.analysis))


def baselines(settings: Settings) -> dict[str, str]:
    """Baseline name → trace id."""
    path = Path(settings.home) / BASELINES_NAME
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {str(k): str(v) for k, v in raw["baselines"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{path}: not a baselines file ({e}); delete it and save the baselines again") from None


def save_baseline(name: str, ref: str | Path | Sequence[Path], settings: Settings, *, partial: bool = False,
                  steps_from: str | None = None) -> Resolved:
    """Names the trace ``ref`` (analysed and cached if it is new) baseline ``name``, replacing one of that name."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise ConfigError(f"baseline name {name!r}: give a word without spaces or ':'")
    resolved = open_trace(ref, settings, partial=partial, steps_from=steps_from)
    known = {**baselines(settings), name: resolved.entry.trace_id}
    Path(settings.home).mkdir(parents=True, exist_ok=True)
    atomic_write(Path(settings.home) / BASELINES_NAME, json.dumps({"baselines": known}, indent=1).encode())
    return resolved


def resolve_baseline(ref: str | Path | Sequence[Path], settings: Settings) -> str | Path | Sequence[Path]:
    """``baseline:NAME`` → the id of that baseline's trace; anything else as it is.

    Raises:
        NotFoundError: no baseline of that name (the message lists those there are).
    """
    if not isinstance(ref, str) or not ref.startswith("baseline:"):
        return ref
    name = ref.removeprefix("baseline:")
    known = baselines(settings)
    if name not in known:
        raise NotFoundError(f"baseline {name!r}: not saved in {settings.home} "
                            f"(saved: {', '.join(sorted(known)) or 'none'}; make one with oracle diff TRACE "
                            f"--save-baseline {name})")
    return known[name]
