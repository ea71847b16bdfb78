"""Finding memory and playbook search by question text, over traces ingested with ``workspace.ingest``."""

from __future__ import annotations

import pytest

from bottleneck_oracle.retrieval import playbook_search, similar_findings
from tests.graphdb.conftest import GPT
from tests.retrieval.conftest import Memory


def test_ingest_embeds_every_finding(memory: Memory) -> None:
    assert memory.gpt.embedded == 3 and memory.dlrm.embedded == 9


def test_similar_findings_finds_the_host_pause_of_gpt_2rank(memory: Memory) -> None:
    hits = similar_findings(memory.store, "a rank stopped for a long time with no op running", k=5)
    assert (hits[0]["trace_id"], hits[0]["category"]) == (memory.gpt.report.trace_id, "host_pause")
    # the 150 ms pause of step 5 and the 12 ms one of step 7 read alike: both come first
    top = next(h for h in hits[:2] if h["step"] == 5)
    assert (top["trace_id"], top["trace_name"], top["category"], top["ranks"], top["severity"]) == (
        memory.gpt.report.trace_id, GPT.name, "host_pause", [1], "major")
    assert top["remedies"] and top["similarity"] > hits[-1]["similarity"]
    assert {h["trace_id"] for h in hits} == {memory.gpt.report.trace_id, memory.dlrm.report.trace_id}


def test_similar_findings_can_leave_out_the_trace_asked_about(memory: Memory) -> None:
    hits = similar_findings(memory.store, "one rank arrives late at the collective", k=3,
                            exclude_trace=memory.gpt.report.trace_id)
    assert hits and {h["trace_id"] for h in hits} == {memory.dlrm.report.trace_id}
    assert hits[0]["category"] == "straggler_rank" and hits[0]["step"] == 10 and hits[0]["ranks"] == [7]
    with pytest.raises(ValueError):
        similar_findings(memory.store, "  ")


def test_playbook_search_by_text(memory: Memory) -> None:
    hits = playbook_search(memory.store, "rank 3 arrives late at the all_reduce and the other ranks wait", k=3)
    assert len(hits) == 3 and hits[0]["category"] == "straggler_rank"
    assert {"key", "title", "remedy", "similarity"} <= set(hits[0])
