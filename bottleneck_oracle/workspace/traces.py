"""Traces of the workspace: resolved by path, id or name, their analyses cached so that asking about
a loaded trace twice never parses its JSON twice.

The workspace (``Settings.home``) keeps ``traces.json``, one entry per trace: its id (a hash of
its files' contents), name, files, how it was read and a fingerprint of the files (paths, sizes,
modification times) that finds the entry again from a path without reading the files. The
analysis itself is pickled under ``analyses/<id>.pkl``: the workspace's own files, written by this
module, read back only when the fingerprint still matches.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, NotFoundError
from bottleneck_oracle.executor import executor_of
from bottleneck_oracle.graphdb.loader import trace_id, trace_name
from bottleneck_oracle.traces import read_trace

__all__ = ["REGISTRY_NAME", "Resolved", "TraceEntry", "atomic_write", "find_entry", "fingerprint_of", "known_traces",
           "open_trace", "remember"]

REGISTRY_NAME = "traces.json"
_CACHE_DIR = "analyses"
_CACHE_VERSION = 8  # bump when Analysis changes shape or results: older pickles are then analysed again


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One trace the workspace knows."""

    trace_id: str
    name: str
    paths: tuple[str, ...]
    partial: bool
    steps_from: str | None
    fingerprint: str

    def to_json(self) -> dict[str, object]:
        return {"trace_id": self.trace_id, "name": self.name, "paths": list(self.paths), "partial": self.partial,
                "steps_from": self.steps_from, "fingerprint": self.fingerprint}


@dataclass(frozen=True, slots=True)
class Resolved:
    """A trace and its analysis."""

    entry: TraceEntry
    analysis: Analysis
    cached: bool  # whether the analysis came from the workspace's cache


def open_trace(ref: str | Path | Sequence[Path], settings: Settings, *, partial: bool = False,
               steps_from: str | None = None, workers: int | None = None) -> Resolved:
    """The trace ``ref`` names: one or more paths (read and analysed unless the workspace has them
    unchanged), or the id, an id prefix or the name of a trace the workspace knows.

    Raises:
        ConfigError: neither a path nor a known trace, or a name two traces share.
        TraceFormatError: a file that is not a trace.
    """
    paths = _as_paths(ref)
    if paths is None:
        entry = find_entry(str(ref), settings)
        paths = [Path(p) for p in entry.paths]
        partial, steps_from = entry.partial, entry.steps_from
        missing = [p for p in paths if not p.exists()]
        if missing:
            raise ConfigError(f"trace {entry.name} ({entry.trace_id}): its files are gone ({missing[0]}); "
                              "ingest it again from where it is now")
    fingerprint = fingerprint_of(paths, partial, steps_from)
    for entry in known_traces(settings):
        if entry.fingerprint == fingerprint and (a := _load_cached(settings, entry.trace_id)) is not None:
            return Resolved(entry, a, True)
    trace = read_trace(paths, partial=partial, executor=executor_of(settings, workers))
    a = analyze(trace, steps_from=steps_from)
    entry = TraceEntry(trace_id(trace), trace_name(paths), tuple(str(p.resolve()) for p in paths), partial,
                       steps_from, fingerprint)
    remember(settings, entry, a)
    return Resolved(entry, a, False)


def known_traces(settings: Settings) -> list[TraceEntry]:
    """Every trace the workspace has resolved or ingested, in the order it first saw them."""
    path = Path(settings.home) / REGISTRY_NAME
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text())
        return [TraceEntry(e["trace_id"], e["name"], tuple(e["paths"]), bool(e["partial"]), e["steps_from"],
                           e["fingerprint"]) for e in raw["traces"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a trace registry ({e}); delete it and ingest the traces again") from None


def remember(settings: Settings, entry: TraceEntry, a: Analysis) -> None:
    """Records ``entry`` (replacing one with its id) and caches its analysis."""
    home = Path(settings.home)
    (home / _CACHE_DIR).mkdir(parents=True, exist_ok=True)
    atomic_write(home / _CACHE_DIR / f"{entry.trace_id}.pkl",
                  pickle.dumps((_CACHE_VERSION, a), protocol=pickle.HIGHEST_PROTOCOL))
    entries = [e for e in known_traces(settings) if e.trace_id != entry.trace_id] + [entry]
    atomic_write(home / REGISTRY_NAME, json.dumps({"traces": [e.to_json() for e in entries]}, indent=1).encode())


def find_entry(ref: str, settings: Settings) -> TraceEntry:
    """The trace of the workspace whose id, id prefix or name is ``ref``.

    Raises:
        NotFoundError: none matches (the message lists the known traces). ConfigError: several match.
    """
    entries = known_traces(settings)
    exact = [e for e in entries if ref in (e.trace_id, e.name)]
    found = exact or [e for e in entries if e.trace_id.startswith(ref)]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        ids = ", ".join(e.trace_id for e in found)
        raise ConfigError(f"trace {ref!r}: {len(found)} traces match ({ids}); give the id")
    known = ", ".join(f"{e.name} ({e.trace_id})" for e in entries) or "none yet"
    raise NotFoundError(f"trace {ref!r}: not a path, and no trace of the workspace has that id or name "
                      f"(known: {known})")


def _as_paths(ref: str | Path | Sequence[Path]) -> list[Path] | None:
    if isinstance(ref, (list, tuple)):
        return [Path(p) for p in ref]
    path = Path(ref)  # type: ignore[arg-type]
    return [path] if isinstance(ref, Path) or path.exists() or os.sep in str(ref) else None


def fingerprint_of(paths: Sequence[Path], partial: bool = False, steps_from: str | None = None) -> str:
    """What the files look like from outside: a changed file gets a new fingerprint."""
    parts = []
    for root in paths:
        files = sorted(p for p in root.iterdir() if p.is_file()) if root.is_dir() else [root]  # what the reader reads
        for f in files:
            stat = f.stat()
            parts.append(f"{f.resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    parts.append(f"partial={partial};steps_from={steps_from}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=12).hexdigest()


def _load_cached(settings: Settings, tid: str) -> Analysis | None:
    path = Path(settings.home) / _CACHE_DIR / f"{tid}.pkl"
    try:
        version, a = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, AttributeError, ImportError):
        return None  # no cache, or one from another version: analyse again
    return a if version == _CACHE_VERSION and isinstance(a, Analysis) else None


def atomic_write(path: Path, data: bytes) -> None:
    """Writes through a temporary file so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
