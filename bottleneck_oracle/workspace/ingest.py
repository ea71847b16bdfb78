"""Ingest: a trace read, analysed, loaded into the graph database with the playbook, its findings
embedded (finding memory) and the graph model's predictions, and remembered in the workspace
(``workspace/traces.py``). ``oracle ingest`` does all of it. A question about a trace not loaded yet
(``workspace/loaded.py``) needs less: the trace read, analysed and loaded; the finding memory embeds the
findings on its first search (``retrieval.similar_findings``), and no question reads the stored predictions."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.config import EMBEDDED_GRAPH_URL, Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.executor import Executor, executor_of
from bottleneck_oracle.graphdb import (
    Capability,
    Detail,
    GraphStore,
    LoadReport,
    load_analysis,
    open_store,
)
from bottleneck_oracle.graphdb import playbook as graph_playbook
from bottleneck_oracle.graphdb.memory import default_embedder, embed_findings, findings_embedded
from bottleneck_oracle.graphdb.predictions import load_prediction, model_predictions, stored_predictions
from bottleneck_oracle.workspace.traces import open_trace

__all__ = ["Ingested", "ingest"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ingested:
    """What `ingest` did: the trace's name, the load, the number of step predictions stored, and the
    findings that carry an embedding (finding memory)."""

    name: str
    report: LoadReport
    predictions: int
    embedded: int = 0


def _remember_findings(store: GraphStore, a: Analysis, tid: str, say: Callable[[str], None]) -> int:
    """Embeds the trace's findings unless they already are; without the ``embed`` extra, says so and skips."""
    if Capability.VECTOR_SEARCH not in store.capabilities:
        return 0
    findings, embedded = findings_embedded(store, tid)
    if findings == 0 or embedded == findings:
        return embedded
    say("embedding findings")
    try:
        embedder = default_embedder()
    except ConfigError as e:
        logger.warning("trace %s: findings not embedded: %s", tid, e)
        say(f"skipping finding embeddings: {e}")
        return 0
    return embed_findings(store, tid, a.findings, embedder)


def _rank_loader(settings: Settings, say: Callable[[str], None]) -> Executor | None:
    """Where the ranks' parts load: as Ray tasks with the ``ray`` executor, each on its own connection;
    else one after the other in this process (one rank's rows at a time)."""
    if settings.executor != "ray":
        return None
    if settings.graph_url.strip() == EMBEDDED_GRAPH_URL and settings.ray_address:
        say("loading the ranks from this machine: the cluster's nodes cannot reach the workspace's embedded "
            "database (set ORACLE_GRAPH_URL to a server they reach)")
        return None
    return executor_of(settings)


def ingest(paths: Sequence[Path], settings: Settings, *, detail: Detail = Detail.FULL, hops: int = 1,
           partial: bool = False, steps_from: str | None = None, predict: bool = True, memory: bool = True,
           stage: Callable[[str], None] | None = None, progress: Callable[[int, int], None] | None = None) -> Ingested:
    """Reads and analyses a trace, loads it into the graph database (starting the embedded one if
    needed) with the playbook, embeds its findings for the finding memory (once per trace, unless
    ``memory`` is off; skipped with a ``stage`` message when the ``embed`` extra is missing), and
    stores the graph model's predictions unless ``predict`` is off.

    Args:
        predict: store the graph model's predictions (imports torch and runs the model on every step: seconds).
        memory: embed the findings now; off, the first search of the finding memory embeds them.
        steps_from: a regex: the user annotations it matches are the steps (see ``analysis.analysis.analyze``).
        stage: called with what starts next (``reading traces``, ``analysing``, ...), and with a
            ``skipping ...`` message for a step that cannot run here.
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
        entries = graph_playbook.read_playbook()
        if not graph_playbook.playbook_is_loaded(store, entries):
            say("loading the optimization playbook")
            graph_playbook.ensure_playbook(store, entries)
        say("loading")
        report = load_analysis(store, a, trace_id=tid, name=name, detail=detail, hops=hops, progress=progress,
                               executor=_rank_loader(settings, say), settings=settings)
        embedded = _remember_findings(store, a, tid, say) if memory else 0
        predictions = stored_predictions(store, tid) if report.outcome == "unchanged" else 0
        if predict and not predictions:  # an unchanged trace keeps the current model's predictions
            say("predicting with the graph model")
            for prediction in model_predictions(a, tid):
                load_prediction(store, prediction)
                predictions += 1
    return Ingested(name, report, predictions, embedded)
