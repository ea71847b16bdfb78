"""Vector search for the agent: findings of every loaded trace (finding memory) and playbook remedies
nearest to a question, its text embedded with the bundled all-MiniLM-L6-v2. The findings of a trace
``oracle ask`` loaded are embedded here, by the first search that needs them."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.graphdb import GraphStore
from bottleneck_oracle.graphdb.embedding import Embedder
from bottleneck_oracle.graphdb.memory import default_embedder, embed_pending_findings, search_findings
from bottleneck_oracle.graphdb.playbook import search_playbook
from bottleneck_oracle.graphdb.types import Row

__all__ = ["similar_findings", "playbook_search"]


def _vector(text: str, embedder: Embedder) -> np.ndarray:
    if not text.strip():
        raise ValueError("the search text is empty")
    return embedder.embed([text])[0]


def similar_findings(store: GraphStore, text: str, k: int = 5, exclude_trace: str | None = None, *,
                     embedder: Embedder | None = None) -> list[Row]:
    """The ``k`` findings of every complete trace most similar to ``text`` (a question or a symptom);
    findings not embedded yet (a trace ``oracle ask`` loaded) are embedded first, and stay so.

    Args:
        store (GraphStore): the database.
        text (str): what to look for.
        k (int): how many findings.
        exclude_trace (str | None): a trace id to leave out (the one being asked about).
        embedder (Embedder | None): the sentence model (default: the bundled one, loaded once per process).

    Returns:
        rows of trace_id, trace_name, idx, step, category, severity, ranks, ops, impact_ms, evidence,
        similarity and remedies (titles of the playbook's entries for the category), most similar first.

    Raises:
        ConfigError: the ``embed`` extra is not installed.
    """
    model = embedder or default_embedder()
    vector = _vector(text, model)
    embed_pending_findings(store, model)
    return search_findings(store, vector, k, exclude_trace)


def playbook_search(store: GraphStore, text: str, k: int = 3, *, embedder: Embedder | None = None) -> list[Row]:
    """The ``k`` playbook entries most similar to ``text``.

    Returns:
        rows of key, category, title, signal, remedy, effect, similarity, most similar first.

    Raises:
        ConfigError: the ``embed`` extra is not installed.
    """
    return search_playbook(store, _vector(text, embedder or default_embedder()), k)
