"""Two runs compared (``analysis/diff.py``), resolved as every command resolves a trace, and named baselines.

The CLI's ``oracle diff``, the agent's ``compare_runs`` tool and the HTTP API call ``diff_traces``. A
baseline is a name for a trace the workspace knows (``baselines.json`` in the workspace): a CI job
saves one from its main branch and compares each change against it.
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
from bottleneck_oracle.workspace.diff_whatif import whatif_between
from bottleneck_oracle.workspace.traces import Resolved, atomic_write, open_trace

__all__ = ["BASELINES_NAME", "Compared", "baselines", "diff_traces", "resolve_baseline", "save_baseline"]

_BRIEF = 3  # movers of each kind in the agent's brief

BASELINES_NAME = "baselines.json"


@dataclass(frozen=True, slots=True)
class Compared:
    """The comparison of NEW against BASE, with the two traces it was made from."""

    diff: RunDiff
    base: Resolved
    new: Resolved
    whatif: dict[str, Any] | None = None  # the edit that takes the slower run to the faster (diff_whatif.py)

    def to_json(self) -> dict[str, object]:
        return {"base_trace": self.base.entry.to_json(), "new_trace": self.new.entry.to_json(), **self.diff.to_json(),
                "whatif": self.whatif}

    def cause(self) -> dict[str, Any] | None:
        """What made the difference: the largest mover of the critical-path attribution, with the
        finding that appeared or went away with it (the what-if's fix where it has one)."""
        top = next(iter(self.diff.moved.get("categories", [])), None)
        if top is None:
            return None
        fixed = (self.whatif or {}).get("edit", "")
        moved = self.diff.moved.get("findings", [])
        finding = next((f for f in moved if fixed == f"fix {f['category']}"), moved[0] if moved else None)
        return {"category": top["category"], "delta_ms": top["delta_ms"], "finding": finding}

    def brief(self) -> dict[str, Any]:
        """The comparison in a few hundred characters of JSON: the verdict, how sure, how comparable,
        the cause and the top movers (the agent's ``compare_runs`` tool)."""
        d = self.diff
        moved = {k: d.moved.get(k, [])[:_BRIEF] for k in ("categories", "ops", "findings", "collectives", "ranks")}
        return {"base": self.base.entry.name, "new": self.new.entry.name, "verdict": d.verdict,
                "headline": d.headline(), "delta_ms": d.delta_ms, "delta_pct": d.delta_pct,
                "interval_pct": list(d.interval_pct), "confidence": d.confidence,
                "confidence_pct": None if d.confidence is None else round(100 * d.confidence),
                "base_median_ms": d.base["median_ms"], "new_median_ms": d.new["median_ms"],
                "comparability": {k: d.comparability[k] for k in ("level", "reasons")}, "cause": self.cause(),
                "moved": moved, "whatif": self.whatif}


def diff_traces(base: str | Path | Sequence[Path], new: str | Path | Sequence[Path], settings: Settings, *,
                partial: bool = False, steps_from: str | None = None) -> Compared:
    """NEW against BASE, each a path (or paths), a trace id or name, or ``baseline:NAME``.

    Raises:
        ConfigError: a trace or baseline that is not there. TraceFormatError: a file that is not a trace.
    """
    a = open_trace(resolve_baseline(base, settings), settings, partial=partial, steps_from=steps_from)
    b = open_trace(resolve_baseline(new, settings), settings, partial=partial, steps_from=steps_from)
    diff = diff_runs(a.analysis, b.analysis)
    return Compared(diff, a, b, whatif_between(diff, a.analysis, b.analysis))


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
