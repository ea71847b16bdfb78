"""Ingest: a trace read, analysed, loaded into the graph database with the playbook and the graph
model's predictions, and remembered in the workspace (``workspace/traces.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import (
    Detail,
    LoadReport,
    load_analysis,
    open_store,
)
from bottleneck_oracle.graphdb import playbook as graph_playbook
from bottleneck_oracle.graphdb.predictions import load_prediction, model_predictions
from bottleneck_oracle.workspace.traces import open_trace

__all__ = ["Ingested", "ingest"]


@dataclass(frozen=True, slots=True)
class Ingested:
    """What `ingest` did: the trace's name, the load and the number of step predictions stored."""

    name: str
    report: LoadReport
    predictions: int


def ingest(paths: Sequence[Path], settings: Settings, *, detail: Detail = Detail.FULL, hops: int = 1,
           partial: bool = False, steps_from: str | None = None, predict: bool = True,
           stage: Callable[[str], None] | None = None, progress: Callable[[int, int], None] | None = None) -> Ingested:
    """Reads and analyses a trace, loads it into the graph database (starting the embedded one if
    needed) with the playbook, and stores the graph model's predictions unless ``predict`` is off.

    Args:
        steps_from: a regex: the user annotations it matches are the steps (see ``dag.analysis.analyze``).
        stage: called with what starts next (``reading traces``, ``analysing``, ...).
        progress: called after each loaded batch with (done, total).

    Raises:
        TraceFormatError: a file is not a trace. GraphStoreError: the database is down or refused a batch.
    """
    say = stage or (lambda _: None)
    say("reading traces")
    resolved = open_trace(list(paths), settings, partial=partial, steps_from=steps_from)
    if not resolved.cached:
        say("analysing")  # (open_trace read and analysed it; the stage names what took the time)
    a, tid, name = resolved.analysis, resolved.entry.trace_id, resolved.entry.name
    with open_store(settings, start=True) as store:
        store.apply_schema()
        say("loading the optimization playbook")
        graph_playbook.ensure_playbook(store, graph_playbook.read_playbook())
        say("loading")
        report = load_analysis(store, a, trace_id=tid, name=name, detail=detail, hops=hops, progress=progress)
        predictions = 0
        if predict:
            say("predicting with the graph model")
            for prediction in model_predictions(a, tid):
                load_prediction(store, prediction)
                predictions += 1
    return Ingested(name, report, predictions)
