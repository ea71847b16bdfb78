"""Model predictions stored beside the measured steps, replaced (not doubled) when stored again."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.graphdb import GraphStore
from bottleneck_oracle.graphdb.predictions import Prediction, load_prediction
from tests.graphdb.conftest import LoadedTrace


def _prediction(t: LoadedTrace, criticality: list[float], version: str = "1") -> Prediction:
    ops = np.arange(len(criticality))
    return Prediction(trace_id=t.trace_id, step=5, rank=1, model="hetero-gat", version=version, step_ms=150.0,
                      op_idx=ops, criticality=np.array(criticality))


def test_a_prediction_is_stored_and_read_back(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    assert load_prediction(store, _prediction(t, [0.1, 0.9, 0.5])) == 3
    assert load_prediction(store, _prediction(t, [0.2, 0.3, 0.95, 0.4])) == 4  # replaces the ratings
    rows = store.read("step_predictions", {"trace": t.trace_id, "step": 5, "rank": 1, "k": 2})
    wall = next(r.wall_ns for r in t.analysis.steps if (r.step, r.rank) == (5, 1)) / 1e6
    assert len(rows) == 1 and rows[0]["model"] == "hetero-gat" and rows[0]["step_ms"] == 150.0
    assert rows[0]["wall_ms"] == pytest.approx(wall, abs=1e-3)
    assert [(o["key"], o["criticality"]) for o in rows[0]["top_ops"]] == \
        [(f"{t.trace_id}:2", 0.95), (f"{t.trace_id}:3", 0.4)]


def test_a_prediction_for_a_step_not_loaded_is_refused(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    t = loaded["gpt_2rank"]
    with pytest.raises(KeyError):
        load_prediction(store, Prediction(t.trace_id, 99, 0, "m", "1", 1.0, np.zeros(0, int), np.zeros(0)))
    with pytest.raises(ValueError):
        Prediction(t.trace_id, 5, 1, "m", "1", 1.0, np.arange(2), np.zeros(3))


def test_the_graph_models_predictions_are_stored_for_every_step_and_rank(
        store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    from bottleneck_oracle.graphdb.predictions import MODEL_NAME, model_predictions

    t = loaded["gpt_2rank"]
    predictions = model_predictions(t.analysis, t.trace_id)
    assert {(p.step, p.rank) for p in predictions} <= {(r.step, r.rank) for r in t.analysis.steps}
    assert {p.rank for p in predictions} == {0, 1} and len(predictions) >= 8
    for p in predictions:
        assert (t.analysis.graph.rank[p.op_idx] == p.rank).all()
        assert ((p.criticality >= 0) & (p.criticality <= 1)).all()
        assert load_prediction(store, p) == len(p.op_idx)  # every rated op is loaded (detail full)
    first = predictions[0]
    rows = store.read("step_predictions", {"trace": t.trace_id, "step": first.step, "rank": first.rank, "k": 3})
    mine = [r for r in rows if r["model"] == MODEL_NAME]
    assert len(mine) == 1 and mine[0]["step_ms"] == pytest.approx(first.step_ms) and len(mine[0]["top_ops"]) == 3
