"""The service layer: `ingest` reads, analyses and loads a real trace once, into a real FalkorDB it starts."""

from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import Detail, list_traces, open_store, stop_server
from bottleneck_oracle.workspace.ingest import ingest
from tests.conftest import REPO

GPT = REPO / "examples" / "gpt_2rank"


def test_ingest_loads_once_then_finds_the_trace_loaded(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workers=1)
    stages: list[str] = []
    batches: list[tuple[int, int]] = []
    try:
        first = ingest([GPT], settings, detail=Detail.SUMMARY, predict=False, stage=stages.append,
                       progress=lambda done, total: batches.append((done, total)))
        again = ingest([GPT], settings, detail=Detail.SUMMARY, predict=False)
        with open_store(settings) as store:
            listed = list_traces(store)
    finally:
        stop_server(tmp_path)
    assert stages == ["reading traces", "analysing", "loading the optimization playbook", "loading"]
    assert first.name == "gpt_2rank" and first.report.outcome == "loaded" and first.predictions == 0
    assert batches and batches[-1][0] == batches[-1][1] == first.report.batches
    assert again.report.outcome == "unchanged" and again.report.trace_id == first.report.trace_id
    assert [(t.trace_id, t.name, t.status) for t in listed] == [(first.report.trace_id, "gpt_2rank", "complete")]
