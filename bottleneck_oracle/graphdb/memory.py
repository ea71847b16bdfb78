"""Finding memory: every finding of every loaded trace, embedded and searchable by meaning.

At ``oracle ingest`` each Finding node gets the embedding (all-MiniLM-L6-v2, the playbook's model)
of ``finding_text``: its category, its evidence and its ops. A trace that ``oracle ask`` loaded has
its findings embedded later, from the text its Finding nodes hold, when the memory is first searched
(``embed_pending_findings``). A question's embedding then finds the most similar findings across every
complete trace in the store, each with the titles of the playbook's remedies for its category (what
fixed it before).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from bottleneck_oracle.findings.finding import Finding
from bottleneck_oracle.graphdb.embedding import Embedder
from bottleneck_oracle.graphdb.store import GraphStore
from bottleneck_oracle.graphdb.types import Capability, Row

__all__ = ["default_embedder", "finding_text", "embed_findings", "embed_pending_findings", "findings_embedded",
           "search_findings"]

_MIN_CANDIDATES = 50  # neighbours asked of the index, so that hidden or excluded traces still leave k


@functools.cache
def default_embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2, loaded once per process (torch takes seconds to import).

    Raises:
        ConfigError: the ``embed`` extra is not installed.
    """
    return Embedder.load()


def _text(category: str, evidence: str, ops: Sequence[str]) -> str:
    text = f"{category.replace('_', ' ')}: {evidence}"
    return f"{text} (ops: {', '.join(ops)})" if ops else text


def finding_text(finding: Finding) -> str:
    """What is embedded for a finding: ``"category: evidence"``, then its ops."""
    return _text(finding.category.value, finding.evidence, finding.ops)


def findings_embedded(store: GraphStore, trace_id: str) -> tuple[int, int]:
    """(findings, embedded): how many findings the complete trace has, and how many carry an embedding."""
    rows = store.read("finding_embedding_state", {"trace": trace_id})
    if not rows:
        return 0, 0
    return int(rows[0]["findings"]), int(rows[0]["embedded"])


def embed_findings(store: GraphStore, trace_id: str, findings: Sequence[Finding], embedder: Embedder) -> int:
    """Embeds the trace's findings (as loaded: ``findings[i]`` is the Finding node of idx ``i``)
    and stores each vector on its node.

    Args:
        store (GraphStore): holds the trace, loaded (``load_analysis``).
        trace_id (str): the trace.
        findings (Sequence[Finding]): the analysis' findings, in its order.
        embedder (Embedder): the sentence model.

    Returns:
        how many Finding nodes got an embedding.
    """
    if not findings:
        return 0
    vectors = embedder.embed([finding_text(f) for f in findings])
    result = store.write("load_finding_embeddings", {
        "trace": trace_id, "idx": list(range(len(findings))),
        "embedding": np.asarray(vectors, dtype=np.float64).tolist(),
    })
    return int(result.rows[0]["updated"]) if result.rows else 0


def embed_pending_findings(store: GraphStore, embedder: Embedder) -> int:
    """Embeds the findings of every complete trace that have no embedding yet (those of a trace
    ``oracle ask`` loaded), from the text their Finding nodes hold: the text ``embed_findings`` embeds
    at ingest, one trace's findings in one batch in idx order as there, so the vectors are the same.

    Args:
        store (GraphStore): the store.
        embedder (Embedder): the sentence model.

    Returns:
        how many Finding nodes got an embedding (0: none was missing, or the backend has no vector index).
    """
    if Capability.VECTOR_SEARCH not in store.capabilities:
        return 0
    pending: dict[str, list[Row]] = {}
    for row in store.read("finding_unembedded"):
        pending.setdefault(row["trace"], []).append(row)
    updated = 0
    for trace, rows in pending.items():
        vectors = embedder.embed([_text(r["category"], r["evidence"], r["ops"] or ()) for r in rows])
        result = store.write("load_finding_embeddings", {
            "trace": trace, "idx": [int(r["idx"]) for r in rows],
            "embedding": np.asarray(vectors, dtype=np.float64).tolist(),
        })
        updated += int(result.rows[0]["updated"]) if result.rows else 0
    return updated


def search_findings(store: GraphStore, vector: np.ndarray, k: int = 5, exclude_trace: str | None = None) -> list[Row]:
    """The ``k`` findings of every complete trace nearest to ``vector`` (a question's embedding).

    Args:
        store (GraphStore): the store, with finding embeddings.
        vector (np.ndarray): float32[384], unit length.
        k (int): how many findings.
        exclude_trace (str | None): a trace id whose findings are left out (the one being asked about).

    Returns:
        rows of trace_id, trace_name, idx, step (None: chronic), category, severity, ranks, ops,
        impact_ms, evidence, similarity (cosine) and remedies (playbook titles of its category),
        most similar first.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    return store.read("finding_search", {
        "vector": np.asarray(vector, dtype=np.float64).tolist(), "candidates": max(_MIN_CANDIDATES, 4 * int(k)),
        "k": int(k), "exclude": exclude_trace,
    })
