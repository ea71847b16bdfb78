"""A trace in the graph database, found from what a user calls it: a path (ingested the first time),
an id, an id prefix or a name, or nothing (the newest trace loaded). A trace ingested here, for a
question, is read, analysed and loaded, no more (``workspace/ingest.py``): the finding memory embeds its
findings on its first search, and ``oracle ingest`` stores the graph model's predictions, which no question reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb import GraphStore, list_traces
from bottleneck_oracle.workspace.ingest import ingest
from bottleneck_oracle.workspace.traces import find_entry, fingerprint_of, known_traces

__all__ = ["LoadedTrace", "loaded_trace"]


@dataclass(frozen=True, slots=True)
class LoadedTrace:
    """A trace the graph database holds complete."""

    trace_id: str
    name: str
    paths: tuple[str, ...]


def loaded_trace(store: GraphStore, ref: str | Path | None, settings: Settings, *,
                 stage: Callable[[str], None] | None = None) -> LoadedTrace:
    """The trace ``ref`` names, loaded into ``store`` (ingested first, without the graph model's
    predictions or the findings' embeddings, when it is a path, or a trace of the workspace, that the
    database does not hold yet); ``None`` is the newest trace loaded.

    Raises:
        ConfigError: nothing loaded yet, or a name no trace has. TraceFormatError: a bad file.
    """
    complete = {t.trace_id: t for t in list_traces(store) if t.status == "complete"}
    if ref is None or str(ref) == "":
        if not complete:
            raise ConfigError("no trace is loaded yet: run `oracle ingest PATH`, or name one with --trace PATH")
        newest = next(iter(complete.values()))  # list_traces: the newest load first
        entry = next((e for e in known_traces(settings) if e.trace_id == newest.trace_id), None)
        return LoadedTrace(newest.trace_id, newest.name, entry.paths if entry else ())
    path = Path(ref)
    if path.exists():
        fingerprint = fingerprint_of([path])
        entry = next((e for e in known_traces(settings) if e.fingerprint == fingerprint), None)
        if entry is None or entry.trace_id not in complete:
            ingest([path], settings, predict=False, memory=False, stage=stage)
            entry = next(e for e in known_traces(settings) if e.fingerprint == fingerprint)
        return LoadedTrace(entry.trace_id, entry.name, entry.paths)
    by_name = [t for t in complete.values() if str(ref) in (t.trace_id, t.name)]
    if len(by_name) == 1:
        entry = next((e for e in known_traces(settings) if e.trace_id == by_name[0].trace_id), None)
        return LoadedTrace(by_name[0].trace_id, by_name[0].name, entry.paths if entry else ())
    entry = find_entry(str(ref), settings)  # raises with the known traces listed
    if entry.trace_id not in complete:
        ingest([Path(p) for p in entry.paths], settings, partial=entry.partial, steps_from=entry.steps_from,
               predict=False, memory=False, stage=stage)
    return LoadedTrace(entry.trace_id, entry.name, entry.paths)
