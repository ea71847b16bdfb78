"""The model and its baselines scored on the same graphs: step time, criticality, what-if and edit ranking.

MAPE values are percentages. Criticality is scored per observed step (Spearman
and Kendall of the predicted against the true share of the wall time, AUROC of
the on-path probability) and averaged over steps. Edit ranking is the Kendall
tau between true and predicted gains of a sample's candidate edits, per step.
Predictors: ``gnn`` (the model alone), ``gnn_replay`` (the replay of the edited
DAG plus the interference the model adds through the replay's levers), ``replay``,
``replay_kappa`` (the same with one kappa fitted on the training what-ifs),
``compute_sum``, ``mlp`` and ``gbt``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.gnn.baselines import (
    AggregateRegressors,
    compute_sum_ms,
    duration_score,
)
from bottleneck_oracle.gnn.corpus import Sample, load_captures, load_split
from bottleneck_oracle.gnn.data import StepGraph
from bottleneck_oracle.gnn.edits import edit_features
from bottleneck_oracle.gnn.predict import SHIPPED_CHECKPOINT, Predictor, StepPrediction

__all__ = ["PREDICTORS", "evaluate", "to_markdown", "plot", "preferred_predictors", "weaker_than_baselines"]

PREDICTORS = ("gnn", "gnn_replay", "replay", "replay_kappa", "compute_sum", "mlp", "gbt")


def _step_predictions(prediction: StepPrediction, regressors: AggregateRegressors | None, sg: StepGraph,
                      replay_ms: float, kappa: float = 0.0, lever_ms: np.ndarray | None = None) -> dict[str, float]:
    missed = kappa * float(lever_ms.sum()) if lever_ms is not None else 0.0
    out = {"gnn": prediction.step_ms, "gnn_replay": replay_ms + prediction.interference_ms, "replay": replay_ms,
           "replay_kappa": replay_ms + missed, "compute_sum": compute_sum_ms(sg)}
    if regressors is not None:
        out.update(regressors.predict(sg))
    return out


def _criticality(true_share: np.ndarray, on_path: np.ndarray, score: np.ndarray,
                 prob: np.ndarray) -> dict[str, float]:
    from scipy.stats import kendalltau, spearmanr
    from sklearn.metrics import roc_auc_score

    # a constant score ranks nothing: 0, where the coefficients are undefined
    out = {"criticality_spearman": float(np.nan_to_num(spearmanr(score, true_share).statistic)),
           "criticality_kendall": float(np.nan_to_num(kendalltau(score, true_share).statistic))}
    if 0 < on_path.sum() < len(on_path):
        out["on_path_auroc"] = float(roc_auc_score(on_path, prob))
    return out


def _mape(pairs: list[tuple[float, float]]) -> float:
    return float(np.mean([abs(p / t - 1) for t, p in pairs]) * 100) if pairs else float("nan")


def _mean(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return float(np.mean(values)) if values else float("nan")


def evaluate(samples: list[Sample], predictor: Predictor, regressors: AggregateRegressors | None,
             progress: Callable[[int, int, str], None] | None = None) -> dict[str, object]:
    """Scores every predictor on ``samples``; also returns ``points`` (true, gnn) pairs for plots."""
    from scipy.stats import kendalltau

    step_pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    crit: dict[str, dict[str, list[float]]] = {"gnn": defaultdict(list), "duration": defaultdict(list)}
    whatif: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    ranking: dict[str, list[float]] = defaultdict(list)
    latency: list[tuple[int, float]] = []
    kappa = float(predictor.checkpoint.train.get("kappa_fit", 0.0))  # type: ignore[arg-type]
    for n, sample in enumerate(samples):
        observed = []
        for sg, replay_ms in zip(sample.graphs, sample.replay_ms):
            prediction = predictor.predict_graph(sg)
            latency.append((len(sg), prediction.latency_ms))
            preds = _step_predictions(prediction, regressors, sg, replay_ms)
            observed.append(preds)
            for name, value in preds.items():
                step_pairs[name].append((sg.step_ms, value))
            for name, (score, prob) in {"gnn": (prediction.share, prediction.on_path),
                                        "duration": (duration_score(sg), duration_score(sg))}.items():
                for metric, value in _criticality(sg.share, sg.on_path, score, prob).items():
                    crit[name][metric].append(value)
        gains: dict[int, list[tuple[float, dict[str, float]]]] = defaultdict(list)
        for w in sample.whatifs:
            for i, mask, truth, replayed, levers in zip(w.graphs, w.masks, w.true_ms, w.replay_ms, w.levers):
                sg = sample.graphs[i]
                edited = edit_features(sg, mask, w.speedup)
                preds = _step_predictions(predictor.predict_graph(edited, levers), regressors, edited, replayed,
                                          kappa, levers)
                for name, value in preds.items():
                    whatif[w.label][name].append((truth, value))
                before = sg.step_ms
                gains[i].append((before - truth, {k: observed[i][k] - v for k, v in preds.items()}))
        for per_edit in gains.values():
            if len(per_edit) < 2:
                continue
            true_gain = [t for t, _ in per_edit]
            for name in per_edit[0][1]:
                tau = kendalltau(true_gain, [p[name] for _, p in per_edit]).statistic
                ranking[name].append(float(tau))
        if progress:
            progress(n + 1, len(samples), sample.sample_id)
    result: dict[str, object] = {
        "samples": len(samples), "steps": len(step_pairs["gnn"]),
        "step_time_mape": _mape(step_pairs["gnn"]),
        **{m: _mean(v) for m, v in crit["gnn"].items()},
        "whatif": {label: {name: _mape(pairs) for name, pairs in by.items()} for label, by in sorted(whatif.items())},
        "whatif_ranking_kendall": {name: _mean(v) for name, v in ranking.items()},
        "baselines": {**{name: {"step_time_mape": _mape(pairs)} for name, pairs in step_pairs.items() if name != "gnn"},
                      "duration": {m: _mean(v) for m, v in crit["duration"].items()}},
        "latency_ms_per_10k_nodes": _latency(latency),
        "points": {"step": step_pairs["gnn"], **{f"whatif:{k}": v["gnn"] for k, v in whatif.items()}},
    }
    return result


def _latency(samples: list[tuple[int, float]]) -> float:
    """CPU ms per 10,000 nodes, fitted through the origin over the graphs seen."""
    if not samples:
        return float("nan")
    n = np.array([s for s, _ in samples], dtype=np.float64)
    ms = np.array([t for _, t in samples], dtype=np.float64)
    return float((n @ ms) / (n @ n) * 1e4)


def preferred_predictors(result: dict[str, object]) -> dict[str, str]:
    """The predictor with the lowest MAPE for each question: ``step_time`` and ``whatif:<edit>``."""
    step = {"gnn": result["step_time_mape"]}
    step.update({name: v["step_time_mape"] for name, v in result["baselines"].items()  # type: ignore[union-attr]
                 if "step_time_mape" in v})
    out = {"step_time": _best(step)}  # type: ignore[arg-type]
    for label, by in result["whatif"].items():  # type: ignore[union-attr]
        out[f"whatif:{label}"] = _best(by)
    return out


def _best(mape: dict[str, float]) -> str:
    known = {k: v for k, v in mape.items() if not math.isnan(v)}
    # on a tie a corrected replay is the plain replay (no lever moved): prefer the plain one
    return min(known, key=lambda k: (known[k], k in ("gnn_replay", "replay_kappa"), k != "gnn")) if known else "gnn"


def weaker_than_baselines(result: dict[str, object]) -> list[str]:
    """One line per question where another predictor beats the GNN (the agent prefers that one there)."""
    lines = []
    for question, best in preferred_predictors(result).items():
        if best == "gnn":
            continue
        if question == "step_time":
            ours = result["step_time_mape"]
            theirs = result["baselines"][best]["step_time_mape"]  # type: ignore[index]
            lines.append(f"step time: {best} ({theirs:.2f}%) beats the GNN ({ours:.2f}%)")
        else:
            by = result["whatif"][question.removeprefix("whatif:")]  # type: ignore[index]
            lines.append(f"what-if {question.removeprefix('whatif:')}: {best} ({by[best]:.2f}%) "
                         f"beats the GNN ({by['gnn']:.2f}%)")
    return lines


def to_markdown(results: dict[str, dict[str, object]]) -> str:
    """The evaluation as markdown tables, one column per split."""
    splits = list(results)
    lines = ["| metric | " + " | ".join(splits) + " |", "|---|" + "---|" * len(splits)]

    def row(label: str, get: Callable[[dict[str, object]], float]) -> None:
        cells = []
        for split in splits:
            try:
                cells.append(f"{get(results[split]):.3f}")
            except (KeyError, TypeError):
                cells.append("n/a")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("steps", lambda r: r["steps"])  # type: ignore[arg-type,return-value]
    row("step-time MAPE % (GNN)", lambda r: r["step_time_mape"])  # type: ignore[arg-type,return-value]
    for name in PREDICTORS[1:]:
        row(f"step-time MAPE % ({name})", lambda r, n=name: r["baselines"][n]["step_time_mape"])  # type: ignore[index]
    for metric in ("criticality_spearman", "criticality_kendall", "on_path_auroc"):
        row(f"{metric} (GNN)", lambda r, m=metric: r[m])  # type: ignore[index,return-value]
        row(f"{metric} (duration)", lambda r, m=metric: r["baselines"]["duration"][m])  # type: ignore[index]
    labels = sorted({label for r in results.values() for label in r["whatif"]})  # type: ignore[union-attr]
    for label in labels:
        for name in PREDICTORS:
            row(f"what-if {label} MAPE % ({name})", lambda r, lb=label, n=name: r["whatif"][lb][n])  # type: ignore[index]
    for name in PREDICTORS:
        row(f"edit-ranking Kendall ({name})", lambda r, n=name: r["whatif_ranking_kendall"][n])  # type: ignore[index]
    row("GNN latency, CPU ms per 10k nodes", lambda r: r["latency_ms_per_10k_nodes"])  # type: ignore[return-value]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict[str, object]], out_dir: Path) -> list[Path]:
    """PNGs: predicted against true step time per split, and what-if MAPE per predictor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4.5), squeeze=False)
    for ax, (split, r) in zip(axes[0], results.items()):
        for key, pairs in r["points"].items():  # type: ignore[union-attr]
            if pairs:
                t, p = zip(*pairs)
                ax.scatter(t, p, s=8, label=key, alpha=0.7)
        ax.set(xscale="log", yscale="log", xlabel="true step ms", ylabel="GNN ms", title=split)
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    written.append(out_dir / "step_time.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4.5), squeeze=False)
    for ax, (split, r) in zip(axes[0], results.items()):
        labels = list(r["whatif"])  # type: ignore[arg-type]
        width = 0.8 / len(PREDICTORS)
        for j, name in enumerate(PREDICTORS):
            values = [r["whatif"][lb].get(name, np.nan) for lb in labels]  # type: ignore[index]
            ax.bar(np.arange(len(labels)) + j * width, values, width, label=name)
        ax.set_xticks(np.arange(len(labels)) + 0.4, labels, rotation=20, fontsize=7)
        ax.set(ylabel="MAPE %", title=f"what-if, {split}", yscale="log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    written.append(out_dir / "whatif_mape.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written


Progress = Callable[[str, int, int, str], None]  # (what, done, total, current item)


def evaluate_data(data: Path, predictor: Predictor, splits: Sequence[str],
                  progress: Progress | None = None) -> dict[str, dict[str, object]]:
    """Scores ``predictor`` on each of ``splits`` of a corpus (``oracle dataset build``), or on real
    captures (``oracle capture`` folders: one split, ``captured``) when ``data`` holds no index.

    Returns:
        split -> ``evaluate``'s result, for the splits that hold a sample.

    Raises:
        ConfigError: no chosen split holds a sample, or no capture is there.
    """
    tell = progress or (lambda what, done, total, item: None)
    if (Path(data) / "index.json").is_file():
        bidirectional = predictor.model.config.bidirectional
        chosen = {split: load_split(data, split, bidirectional=bidirectional,
                                    progress=lambda done, total, sid, s=split: tell(f"reading {s}", done, total, sid))
                  for split in splits}
    else:  # real captures: no split, their what-if truth comes from re-captures
        chosen = {"captured": load_captures(data, progress=lambda done, total, sid: tell("reading", done, total, sid))}
    rows = predictor.checkpoint.baseline_rows
    regressors = AggregateRegressors(*rows) if rows is not None else None
    results = {split: evaluate(samples, predictor, regressors,
                               progress=lambda done, total, sid, s=split: tell(f"scoring {s}", done, total, sid))
               for split, samples in chosen.items() if samples}
    if not results:
        raise ConfigError(f"{data}: none of the splits {', '.join(splits)} holds a sample")
    return results


def without_points(results: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    """The results as stored and printed: every metric, not the (true, predicted) pairs kept for plots."""
    return {split: {k: v for k, v in r.items() if k != "points"} for split, r in results.items()}


def record_scores(results: dict[str, dict[str, object]], checkpoint: Path | None = None) -> None:
    """Stores the scores, and the best predictor per question on the first split, in the checkpoint's
    ``config.json`` (the shipped one by default), where ``Predictor.preferred`` reads them."""
    from bottleneck_oracle.gnn.train import record_metrics

    first = next(iter(results.values()))
    record_metrics(checkpoint or SHIPPED_CHECKPOINT,
                   {"splits": without_points(results), "preferred": preferred_predictors(first)})
