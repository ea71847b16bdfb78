"""``oracle train`` and ``oracle gnn-eval``: the graph model trained on a corpus and scored against its
baselines. Torch loads only when one of these commands runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bottleneck_oracle.cli._render import bar, paragraph, print_json, stderr, stdout

__all__ = ["gnn_eval_command", "train_command"]


def train_command(
    data: Annotated[Path, typer.Option(help="Corpus built by `oracle dataset build`.")],
    out: Annotated[Path, typer.Option(help="Checkpoint folder to write (model.pt, config.json, baselines.npz).")],
    epochs: Annotated[int, typer.Option(help="At most this many epochs.")] = 30,
    patience: Annotated[int, typer.Option(help="Stop after this many epochs without a better validation score "
                                               "(step-time error plus the walk's miss of the critical path).")] = 6,
    seed: Annotated[int, typer.Option(help="Seeds Python, NumPy and torch.")] = 0,
    hidden: Annotated[int, typer.Option(help="Width of every layer.")] = 64,
    layers: Annotated[int, typer.Option(help="Message-passing layers.")] = 3,
    directed: Annotated[bool, typer.Option(help="Pass messages along DAG edges only (no reverse edges).")] = False,
    max_minutes: Annotated[float, typer.Option(help="Start no epoch that would end past this many minutes.")] = 14.0,
    refit_steps: Annotated[int, typer.Option(
        help="Then fit the step-time and interference heads alone, the rest frozen, on this many graphs.")] = 800,
) -> None:
    """Train the HeteroGAT on a corpus's train split, stopping early on its val split."""
    from bottleneck_oracle.gnn.corpus import load_split
    from bottleneck_oracle.gnn.train import TrainConfig, save_checkpoint, train

    err = stderr()
    sets = {}
    for split in ("train", "val"):
        with bar(err, f"reading {split}") as progress:
            task = progress.add_task("", total=None)
            sets[split] = load_split(data, split, bidirectional=not directed,
                                     progress=lambda done, total, sid: progress.update(
                                         task, completed=done, total=total, description=sid))
    config = TrainConfig(epochs=epochs, patience=patience, seed=seed, hidden=hidden, layers=layers,
                         bidirectional=not directed, max_minutes=max_minutes, refit_steps=refit_steps)
    with bar(err, "training") as progress:
        task = progress.add_task("", total=epochs)

        def report(epoch: int, total: int, loss: float, score: float) -> None:
            line = f"epoch {epoch}/{total}: loss {loss:.4f}, val score {score:.4f}"
            progress.update(task, completed=epoch, description=line)
            if not err.is_terminal:  # a log file gets a line per epoch instead of a bar
                err.print(line)

        ckpt = train(sets["train"], sets["val"], config, progress=report)
    save_checkpoint(ckpt, out)
    stdout(soft_wrap=True).print(f"{out}: trained on {len(sets['train'])} traces in {ckpt.train['seconds']} s, "
                                  f"best validation score {ckpt.train['best_val_score']:.4f} "
                                  "(step-time error plus the walk's miss of the critical path)")


def gnn_eval_command(
    data: Annotated[Path, typer.Option(help="Corpus built by `oracle dataset build` (its test and ood splits), "
                                            "or real captures (`oracle capture` folders).")],
    checkpoint: Annotated[Optional[Path], typer.Option(help="Checkpoint folder; the shipped one by default.")] = None,
    splits: Annotated[str, typer.Option(help="Comma-separated splits to score.")] = "test,ood",
    plots: Annotated[Optional[Path], typer.Option(help="Folder for step_time.png and whatif_mape.png.")] = None,
    record: Annotated[bool, typer.Option(help="Store the scores and the best predictor per question in the "
                                              "checkpoint's config.json.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Score the GNN and its baselines: step time, criticality, what-if MAPE and edit ranking."""
    from bottleneck_oracle.gnn.evaluate import (
        evaluate_data,
        plot,
        record_scores,
        to_markdown,
        weaker_than_baselines,
        without_points,
    )
    from bottleneck_oracle.gnn.predict import Predictor

    err = stderr()
    predictor = Predictor(checkpoint)
    chosen = [s.strip() for s in splits.split(",") if s.strip()]
    with bar(err, "evaluating") as progress:
        task = progress.add_task("", total=None)
        results = evaluate_data(data, predictor, chosen, progress=lambda what, done, total, item: progress.update(
            task, completed=done, total=total, description=f"{what}: {item}"))
    for split in chosen:
        if split not in results and "captured" not in results:
            err.print(f"{split}: no samples, skipped")
    if plots is not None:
        plot(results, plots)
    notes = {split: weaker_than_baselines(r) for split, r in results.items()}
    if record:
        record_scores(results, checkpoint)
    if as_json:
        scores = without_points(results)
        body = dict(next(iter(scores.values())))
        body["splits"] = scores
        body["weaker_than_baselines"] = notes
        print_json(body)
        return
    console = stdout(soft_wrap=True)  # a markdown table keeps its rows whole, to be pasted
    console.print(to_markdown(results), markup=False, highlight=False)
    for split, lines in notes.items():
        for line in lines:
            paragraph(console, f"{split}: {line}", 0, hang=2)
