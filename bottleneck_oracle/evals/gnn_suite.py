"""The graph-model suite: ``oracle gnn-eval``'s scores on the cases' traces, the model's predicted step
times against each step's recorded wall time (its slowest rank), and its criticality against the
critical path the analysis found.

Each trace is one sample of ``gnn/corpus.py`` (its node what-ifs too, where a ``whatif.json`` lies
beside it) scored by ``gnn/evaluate.py``'s ``evaluate``, with the checkpoint's baselines beside the
model; a step larger than ``MAX_NODES`` keeps its longest ranks, as ``gnn/`` does everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import OracleError
from bottleneck_oracle.evals.types import Case, CaseResult, SuiteResult
from bottleneck_oracle.gnn.baselines import AggregateRegressors
from bottleneck_oracle.gnn.corpus import load_sample
from bottleneck_oracle.gnn.evaluate import evaluate
from bottleneck_oracle.gnn.predict import Predictor
from bottleneck_oracle.workspace.whatif import graph_model

__all__ = ["MAX_NODES", "SUITE", "run_gnn"]

SUITE = "gnn"
MAX_NODES = 200_000  # per step graph, as gnn/corpus.py loads samples
Progress = Callable[[int, int], None]  # (cases done, cases)
_CRITICALITY = ("on_path_auroc", "criticality_spearman", "criticality_kendall")


def _number(value: object) -> float | None:
    return None if not isinstance(value, (int, float)) or math.isnan(value) else round(float(value), 4)


def _weighted(rows: list[dict[str, Any]], get: Callable[[dict[str, Any]], object]) -> float | None:
    """The mean of a per-step metric over every step of every row (each row's value weighs its steps)."""
    pairs = [(float(v), r["steps"]) for r in rows if (v := _number(get(r))) is not None and r["steps"]]
    total = sum(n for _, n in pairs)
    return round(sum(v * n for v, n in pairs) / total, 4) if total else None


def _scored(case: Case, predictor: Predictor, regressors: AggregateRegressors | None) -> dict[str, Any]:
    sample = load_sample(case.trace, case.id, "eval", bidirectional=predictor.model.config.bidirectional,
                         max_nodes=MAX_NODES)
    result = evaluate([sample], predictor, regressors)
    baselines: dict[str, dict[str, float]] = result["baselines"]  # type: ignore[assignment]
    points: dict[str, list[tuple[float, float]]] = result["points"]  # type: ignore[assignment]
    return {"steps": result["steps"], "step_mape": _number(result["step_time_mape"]),
            **{m: _number(result.get(m)) for m in _CRITICALITY},
            "baselines": {name: _number(v.get("step_time_mape")) for name, v in baselines.items()
                          if "step_time_mape" in v},
            "step_ms": [{"true_ms": round(t, 3), "predicted_ms": round(p, 3)} for t, p in points["step"]],
            "whatif_mape": {label: {k: _number(v) for k, v in by.items()}
                            for label, by in result["whatif"].items()}}  # type: ignore[union-attr]


def run_gnn(cases: list[Case], settings: Settings, *, llm: str = "offline", base_url: str | None = None,
            progress: Progress | None = None, predictor: Predictor | None = None,
            regressors: bool = False) -> SuiteResult:
    """The graph model (``predictor``, default the shipped checkpoint) scored on each case's trace.

    Args:
        regressors: also score the checkpoint's aggregate regressors (``mlp``, ``gbt``: fitted here,
            half a minute on two cores) beside the replay and compute-sum baselines.

    ``settings``, ``llm`` and ``base_url`` are unused: the model reads the trace files itself.

    Returns:
        ``SuiteResult("gnn", metrics, rows)`` with metrics ``{"step_mape": the model's step-time MAPE %
        over every step, "criticality_auc": AUROC of its on-path probability against the critical path,
        "criticality_spearman": rank correlation of its predicted against the true share of the wall
        time, "baselines": {predictor: step-time MAPE %}, "steps": steps scored, "n": cases scored,
        "failed": cases whose trace could not be scored}`` (None
        where nothing was scored); one row per case with ``steps, step_mape, on_path_auroc,
        criticality_spearman, criticality_kendall, baselines, step_ms [{true_ms, predicted_ms}],
        whatif_mape``. A case passes when its step MAPE beats the ``compute_sum`` baseline's (the replay
        baselines reproduce an observed step exactly, by construction: they are the floor, not a rival).
    """
    predictor = predictor or graph_model()
    rows_of = predictor.checkpoint.baseline_rows
    fitted = AggregateRegressors(*rows_of) if regressors and rows_of is not None else None
    scored: list[dict[str, Any]] = []
    rows: list[CaseResult] = []
    for i, case in enumerate(cases):
        try:
            s = _scored(case, predictor, fitted)
        except OracleError as e:  # a trace the model cannot read: the case fails, the suite goes on
            rows.append(CaseResult(case.id, False, {"error": str(e)}))
        else:
            scored.append(s)
            naive = s["baselines"].get("compute_sum")
            passed = s["step_mape"] is not None and (naive is None or s["step_mape"] < naive)
            rows.append(CaseResult(case.id, passed, s))
        if progress:
            progress(i + 1, len(cases))
    names = sorted({name for s in scored for name in s["baselines"]})
    metrics = {
        "step_mape": _weighted(scored, lambda r: r["step_mape"]),
        "criticality_auc": _weighted(scored, lambda r: r["on_path_auroc"]),
        "criticality_spearman": _weighted(scored, lambda r: r["criticality_spearman"]),
        "baselines": {name: _weighted(scored, lambda r, n=name: r["baselines"].get(n)) for name in names},
        "steps": sum(s["steps"] for s in scored),
        "n": len(scored),
        "failed": len(cases) - len(scored),
    }
    return SuiteResult(SUITE, metrics, tuple(rows))
