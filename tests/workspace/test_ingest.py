"""The service layer: `ingest` reads, analyses and loads a real trace once, into a real FalkorDB it starts."""

from __future__ import annotations

import subprocess
import sys
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
    assert stages == ["reading traces", "analysing", "loading the optimization playbook", "loading",
                      "embedding findings"]
    assert first.name == "gpt_2rank" and first.report.outcome == "loaded" and first.predictions == 0
    assert first.embedded == again.embedded == 3  # the findings are embedded once
    assert batches and batches[-1][0] == batches[-1][1] == first.report.batches
    assert again.report.outcome == "unchanged" and again.report.trace_id == first.report.trace_id
    assert [(t.trace_id, t.name, t.status) for t in listed] == [(first.report.trace_id, "gpt_2rank", "complete")]


def test_ingest_without_the_embed_extra_skips_the_finding_memory(tmp_path: Path) -> None:
    """A real process where the sentence encoder's tokenizer cannot be imported: the trace still loads."""
    code = (
        "import sys; sys.modules['tokenizers'] = None\n"
        "from pathlib import Path\n"
        "from bottleneck_oracle.config import Settings\n"
        "from bottleneck_oracle.graphdb import Detail, stop_server\n"
        "from bottleneck_oracle.workspace.ingest import ingest\n"
        f"home = Path({str(tmp_path)!r})\n"
        "try:\n"
        f"    done = ingest([Path({str(GPT)!r})], Settings(home=home, workers=1), detail=Detail.SUMMARY,\n"
        "                  predict=False, stage=lambda s: print('stage:', s))\n"
        "finally:\n"
        "    stop_server(home)\n"
        "print('outcome:', done.report.outcome, done.embedded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    skipped = [line for line in lines if line.startswith("stage: skipping finding embeddings")]
    assert len(skipped) == 1 and "embed" in skipped[0] and "\n" not in skipped[0]
    assert lines[-1] == "outcome: loaded 0"


def test_an_unchanged_trace_keeps_the_models_predictions_until_the_model_is_newer(tmp_path: Path) -> None:
    """Ingesting a trace again runs nothing (5 s of torch and the graph model before); a checkpoint written
    after the predictions were stored makes them stale."""
    import shutil

    from bottleneck_oracle.gnn.shipped import SHIPPED_CHECKPOINT
    from bottleneck_oracle.graphdb.predictions import stored_predictions

    settings = Settings(home=tmp_path / "home", workers=1)
    stages: list[str] = []
    try:
        first = ingest([GPT], settings, detail=Detail.SUMMARY, memory=False)
        again = ingest([GPT], settings, detail=Detail.SUMMARY, memory=False, stage=stages.append)
        retrained = Path(shutil.copytree(SHIPPED_CHECKPOINT, tmp_path / "retrained"))
        (retrained / "model.pt").touch()  # written now: after the stored predictions
        with open_store(settings) as store:
            kept = stored_predictions(store, first.report.trace_id)
            stale = stored_predictions(store, first.report.trace_id, retrained)
    finally:
        stop_server(tmp_path / "home")
    assert first.predictions > 0 and again.predictions == kept == first.predictions
    assert again.report.outcome == "unchanged" and "predicting with the graph model" not in stages
    assert stale == 0
