"""Finding memory: the findings of every loaded real trace, embedded with the bundled model and found
by meaning across traces, with the playbook's remedies for their category."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.findings.finding import Finding
from bottleneck_oracle.graphdb import Capability, GraphStore, load_analysis, open_store
from bottleneck_oracle.graphdb.adhoc import run_read_only
from bottleneck_oracle.graphdb.embedding import Embedder
from bottleneck_oracle.graphdb.memory import (
    embed_findings,
    embed_pending_findings,
    finding_text,
    findings_embedded,
    search_findings,
)
from bottleneck_oracle.graphdb.playbook import ensure_playbook, read_playbook
from bottleneck_oracle.vocabulary import Bottleneck
from tests.graphdb.conftest import DLRM, GPT, LoadedTrace, graph_settings


@pytest.fixture(scope="module")
def remembered(store: GraphStore, loaded: dict[str, LoadedTrace], embedder: Embedder) -> dict[str, LoadedTrace]:
    """The loaded traces with their findings embedded, and the playbook."""
    if Capability.VECTOR_SEARCH not in store.capabilities:
        pytest.skip("no vector index on this backend")
    ensure_playbook(store, read_playbook())
    for t in loaded.values():
        assert embed_findings(store, t.trace_id, t.analysis.findings, embedder) == len(t.analysis.findings)
    return loaded


def test_finding_text_is_category_evidence_and_ops() -> None:
    f = Finding(Bottleneck.HOST_PAUSE, 5, (1,), ("aten::select",), 146.5, "rank 1 ran no op for 150 ms")
    assert finding_text(f) == "host pause: rank 1 ran no op for 150 ms (ops: aten::select)"


def test_every_finding_of_a_trace_gets_an_embedding(store: GraphStore, remembered: dict[str, LoadedTrace]) -> None:
    for t in remembered.values():
        assert findings_embedded(store, t.trace_id) == (len(t.analysis.findings), len(t.analysis.findings))
    assert findings_embedded(store, "no-such-trace") == (0, 0)


def test_search_finds_the_host_pause_across_traces(store: GraphStore, remembered: dict[str, LoadedTrace],
                                                   embedder: Embedder) -> None:
    gpt, dlrm = remembered[GPT.name], remembered[DLRM.name]
    vector = embedder.embed(["a rank stopped for a long time with no op running"])[0]
    hits = search_findings(store, vector, k=5)
    assert {h["trace_id"] for h in hits} >= {gpt.trace_id}
    assert (hits[0]["trace_id"], hits[0]["category"]) == (gpt.trace_id, "host_pause")
    top = next(h for h in hits[:2] if h["step"] == 5)  # step 7's short pause reads alike
    assert (top["trace_id"], top["trace_name"], top["category"], top["ranks"]) == (
        gpt.trace_id, GPT.name, "host_pause", [1])
    assert top["impact_ms"] == pytest.approx(146.537) and "150.248 ms" in top["evidence"]
    assert top["remedies"] and all(isinstance(r, str) for r in top["remedies"])
    titles = {e.title for e in read_playbook() if e.category is Bottleneck.HOST_PAUSE}
    assert set(top["remedies"]) == titles
    assert [h["similarity"] for h in hits] == sorted((h["similarity"] for h in hits), reverse=True)
    straggler = embedder.embed(["one rank reaches the all-reduce late and the others wait"])[0]
    found = {(h["trace_id"], h["category"]) for h in search_findings(store, straggler, k=4)}
    assert {(gpt.trace_id, "straggler_rank"), (dlrm.trace_id, "straggler_rank")} <= found


def test_search_leaves_out_the_excluded_trace(store: GraphStore, remembered: dict[str, LoadedTrace],
                                              embedder: Embedder) -> None:
    gpt = remembered[GPT.name]
    vector = embedder.embed(["a rank stopped for a long time with no op running"])[0]
    hits = search_findings(store, vector, k=3, exclude_trace=gpt.trace_id)
    assert len(hits) == 3 and gpt.trace_id not in {h["trace_id"] for h in hits}
    with pytest.raises(ValueError):
        search_findings(store, vector, k=0)


def test_pending_findings_are_embedded_from_their_nodes_as_ingest_embeds_them(
        graph_home: Path, analyses: dict[str, LoadedTrace], embedder: Embedder) -> None:
    """A trace loaded without its embeddings (as ``oracle ask`` loads one) gets, from the text its Finding
    nodes hold, the vectors ``embed_findings`` makes from the analysis; once, and only for complete traces."""
    gpt = analyses[GPT.name]
    with open_store(graph_settings(graph_home, "falkordb", "pending_memory")) as store:
        store.apply_schema()
        assert embed_pending_findings(store, embedder) == 0  # nothing loaded
        load_analysis(store, gpt.analysis, trace_id=gpt.trace_id, name=gpt.name)
        assert findings_embedded(store, gpt.trace_id) == (3, 0)
        assert embed_pending_findings(store, embedder) == 3
        assert embed_pending_findings(store, embedder) == 0  # done once
        rows = run_read_only(store, "MATCH (f:Finding {trace: $trace}) RETURN f.idx AS idx, f.embedding AS embedding "
                                    "ORDER BY idx", params={"trace": gpt.trace_id})
    stored = np.array([r["embedding"] for r in rows], dtype=np.float32)
    assert np.array_equal(stored, embedder.embed([finding_text(f) for f in gpt.analysis.findings]))
