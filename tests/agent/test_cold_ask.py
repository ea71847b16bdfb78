"""The first question about a new trace, in a new workspace, loads what it needs: the trace read, analysed
and loaded into the database; neither the graph model's predictions (torch) nor the findings' embeddings.
A later question that searches the finding memory embeds the findings then, with the vectors ``oracle
ingest`` stores, and they stay for the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.agent.conversation import Conversation
from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import open_store, stop_server
from bottleneck_oracle.graphdb.adhoc import run_read_only
from bottleneck_oracle.graphdb.memory import default_embedder, finding_text, findings_embedded
from bottleneck_oracle.workspace import ingest as ingest_module
from bottleneck_oracle.workspace.traces import open_trace
from tests.agent.conftest import GPT

# `oracle ask` as the console script runs it, saying at exit which heavy modules the process imported
_PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('imported:', sorted(m for m in ('torch', 'torch_geometric', "
    "'sentence_transformers') if m in sys.modules), file=sys.stderr))\n"
    f"sys.argv = ['oracle', 'ask', 'why is my training slow?', '--trace', {str(GPT)!r}]\n"
    "from bottleneck_oracle.cli.app import main\n"
    "main()\n"
)


def _no_graph_model(*_: object) -> list[object]:
    raise AssertionError("the graph model ran for a question that does not use it")


def _predictions(settings: Settings) -> int:
    with open_store(settings) as store:
        return int(run_read_only(store, "MATCH (p:Prediction) RETURN count(p) AS n")[0]["n"])


def test_cold_ask_loads_neither_the_graph_model_nor_the_embeddings_until_a_question_needs_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "model_predictions", _no_graph_model)
    settings = Settings(home=tmp_path, workers=2)
    stages: list[str] = []
    try:
        with Conversation(settings, trace=str(GPT), stage=stages.append) as conversation:
            trace_id = conversation.context.resolve().trace_id  # as `oracle ask` does, before the tools run
            first = conversation.ask("why is my training slow?")
        with open_store(settings) as store:
            cold = findings_embedded(store, trace_id)
        cold_predictions = _predictions(settings)
        with Conversation(settings, trace=str(GPT)) as conversation:  # a later `oracle ask`
            conversation.context.resolve()
            seen = conversation.ask("have we seen this before?")
        with open_store(settings) as store:
            later = findings_embedded(store, trace_id)
            rows = run_read_only(store, "MATCH (f:Finding {trace: $trace}) RETURN f.embedding AS embedding "
                                        "ORDER BY f.idx", params={"trace": trace_id})
        later_predictions = _predictions(settings)
    finally:
        stop_server(tmp_path)
    assert first.answered and all(c["ok"] for c in first.tool_calls)
    assert stages == ["reading traces", "analysing", "loading the optimization playbook", "loading"]
    assert cold == (3, 0) and cold_predictions == 0
    searched = [c for c in seen.tool_calls if c["name"] == "similar_findings"]
    assert seen.answered and searched and all(c["ok"] for c in searched)
    assert later == (3, 3) and later_predictions == 0  # embedded by the search, kept; still no graph model
    findings = open_trace(trace_id, settings).analysis.findings
    expected = default_embedder().embed([finding_text(f) for f in findings])  # what ingest would have stored
    assert np.array_equal(np.array([r["embedding"] for r in rows], dtype=np.float32), expected)


def test_cold_ask_process_imports_no_torch(tmp_path: Path) -> None:
    """A first `oracle ask` in a new workspace, about a trace given by its path, as a process: the trace is
    ingested for the question, and torch (the graph model) is never imported."""
    env = {**os.environ, "ORACLE_HOME": str(tmp_path)}
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    finally:
        stop_server(tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "loading..." in out.stderr and "predicting with the graph model" not in out.stderr
    assert "embedding findings" not in out.stderr and "imported: []" in out.stderr, out.stderr[-500:]


def test_the_question_classifier_and_the_finding_memory_share_one_sentence_model() -> None:
    """all-MiniLM-L6-v2 holds 91 MB of weights and takes 0.3 s to load: a question that is classified and then
    searches the findings loads it once."""
    from bottleneck_oracle.agent.intents import embedder

    assert embedder() is default_embedder()
