"""The ``oracle`` command line: parse flags, call the library, render the result."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bottleneck_oracle.config import EMBEDDED_GRAPH_URL, Settings
from bottleneck_oracle.dag.analysis import Analysis, analyze
from bottleneck_oracle.dag.overlay import write_overlay
from bottleneck_oracle.dag.report import analysis_to_dict
from bottleneck_oracle.dag.types import CATEGORIES
from bottleneck_oracle.errors import ConfigError, OracleError
from bottleneck_oracle.graphdb import (
    Detail, list_traces, load_analysis, open_store, server_status, start_server, stop_server, trace_id,
)
from bottleneck_oracle.graphdb import playbook as graph_playbook
from bottleneck_oracle.graphdb.loader import trace_name
from bottleneck_oracle.graphdb.predictions import load_prediction, model_predictions
from bottleneck_oracle.traces import read_trace

app = typer.Typer(
    name="oracle", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Find what makes a training step slow from its PyTorch profiler traces.",
)
db_app = typer.Typer(name="db", no_args_is_help=True, help="Start, stop or check the embedded graph database.")
app.add_typer(db_app)
dataset_app = typer.Typer(name="dataset", no_args_is_help=True, help="Corpora of synthetic traces with ground truth.")
app.add_typer(dataset_app)
_SHORT = {"gpu_compute": "gpu", "communication": "comm", "cpu": "cpu", "launch_overhead": "launch",
          "sync_wait": "sync", "data_loading": "data", "idle": "idle"}


def _steps_table(data: dict, console: Console) -> None:
    table = Table(title="Steps: wall time and where it went (ms, critical path)", title_justify="left")
    for col in ["step", "rank", "wall", *(_SHORT[c.value] for c in CATEGORIES), ""]:
        table.add_column(col, justify="right" if col not in ("",) else "left")
    for s in data["steps"]:
        mark = "[bold red]slow[/]" if s["slow"] else ("partial" if s["partial"] else "")
        cells = [f"{s['breakdown_ms'][c.value]:.1f}" for c in CATEGORIES]
        table.add_row(str(s["step"]), str(s["rank"]), f"{s['wall_ms']:.1f}", *cells, mark)
    console.print(table)


def _findings_table(data: dict, console: Console) -> None:
    if not data["findings"]:
        console.print("No bottleneck found: no step stands out and no category dominates.")
        return
    table = Table(title="Findings (largest impact first)", title_justify="left", show_lines=False)
    for col in ("category", "step", "ranks", "impact ms", "evidence"):
        table.add_column(col, overflow="fold")
    for f in data["findings"][:15]:
        step = "all" if f["step"] is None else str(f["step"])
        table.add_row(f["category"], step, ",".join(map(str, f["ranks"])), f"{f['impact_ms']:.1f}", f["evidence"])
    console.print(table)


def _why_slowest(a: Analysis, data: dict, console: Console) -> None:
    if not data["steps"]:
        return
    slowest = max(data["steps"], key=lambda s: s["wall_ms"] if not s["partial"] else -1)
    step, rank = slowest["step"], slowest["rank"]
    label = "the whole trace" if step < 0 else f"step {step}"
    console.print(f"\n[bold]Why is {label} slow?[/] (rank {rank}, {slowest['wall_ms']:.1f} ms)")
    peers = [s["wall_ms"] for s in data["steps"] if s["rank"] == rank and s["step"] != step and not s["partial"]]
    if peers:
        peers.sort()
        console.print(f"  the rank's other steps take {peers[len(peers) // 2]:.1f} ms (median)")
    reasons = [f for f in data["findings"] if f["step"] == step] or [f for f in data["findings"] if f["step"] is None]
    for f in reasons[:3]:
        console.print(f"  - [bold]{f['category']}[/]: {f['evidence']}", highlight=False)
    top = sorted(slowest["critical_path"], key=lambda e: -e["contrib_us"])[:5]
    console.print("  largest items on its critical path:")
    for e in top:
        console.print(f"    {e['contrib_us'] / 1000:8.2f} ms  {e['category']:<15} rank {e['rank']}  {e['name'][:80]}",
                      highlight=False)


@app.callback()
def _group() -> None:
    """Find what makes a training step slow from its PyTorch profiler traces."""


@app.command("analyze")
def analyze_command(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or folders (one file per rank; .json or .json.gz).")],
    step: Annotated[Optional[int], typer.Option(help="Report only this ProfilerStep number.")] = None,
    rank: Annotated[Optional[int], typer.Option(help="Report only this rank.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    overlay: Annotated[Optional[Path], typer.Option(help="Write a Perfetto trace with the critical path marked.")] = None,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
) -> None:
    """Build the execution graph, find each step's critical path, and explain the slow steps."""
    settings = Settings.from_env()
    err = Console(stderr=True)
    with err.status("reading traces...") if not as_json else nullcontext():
        trace = read_trace(paths, workers=settings.workers, partial=partial)
    with err.status("analysing...") if not as_json else nullcontext():
        a = analyze(trace)
    data = analysis_to_dict(a, step=step, rank=rank)
    if overlay is not None:
        marked = write_overlay(a, overlay, step=step, rank=rank)
        err.print(f"overlay: {overlay} ({marked} critical nodes marked; open it in ui.perfetto.dev)")
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        return
    console = Console()
    t = data["trace"]
    console.print(f"[bold]{len(t['ranks'])} rank(s)[/], {t['events']:,} events, {t['nodes']:,} nodes, "
                  f"{t['edges']:,} edges; {t['collectives_matched']} of {t['collectives']} collectives matched "
                  f"across ranks" + ("" if t["steps_annotated"] else "; no ProfilerStep: the whole trace is one step"))
    _steps_table(data, console)
    _findings_table(data, console)
    _why_slowest(a, data, console)


@app.command("capture")
def capture_command(
    out_dir: Annotated[Path, typer.Argument(
        help="Folder for rank{r}.pt.trace.json.gz, rank{r}.et.json.gz and manifest.json.")],
    ranks: Annotated[int, typer.Option(help="gloo processes on 127.0.0.1 (DDP).")] = 2,
    steps: Annotated[int, typer.Option(help="Recorded profiler steps.")] = 8,
    layers: Annotated[int, typer.Option(help="GPT blocks.")] = 2,
    d_model: Annotated[int, typer.Option(help="Model width.")] = 128,
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence.")] = 64,
    batch_size: Annotated[int, typer.Option(help="Sequences per rank and step.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of weights and data.")] = 0,
    inject: Annotated[Optional[list[str]], typer.Option(
        help="CATEGORY@STEP[:RANK,...][=SIZE], repeatable; STEP as in ProfilerStep#N.")] = None,
    pipeline: Annotated[int, typer.Option(
        help="Pipeline stages, trained 1F1B with send/recv; ranks = stages x data-parallel replicas.")] = 1,
    microbatches: Annotated[Optional[int], typer.Option(
        help="Micro-batches per step with --pipeline (default 4); each gets batch-size/M sequences.")] = None,
    whatif: Annotated[Optional[list[str]], typer.Option(
        help="Re-capture with one change, repeatable: remove_injection[=I], microbatches[=K], "
             "data_parallel=D; true step times go to whatif.json.")] = None,
) -> None:
    """Train a small GPT with DDP (or pipeline stages) under torch.profiler and write one trace per rank."""
    from bottleneck_oracle.traces.capture import CaptureConfig, capture, parse_injection
    from bottleneck_oracle.traces.capture_whatif import apply_capture_edit, capture_whatif
    from bottleneck_oracle.traces.synth.whatif import parse_edit

    config = CaptureConfig(ranks=ranks, steps=steps, layers=layers, d_model=d_model, seq_len=seq_len,
                           batch_size=batch_size, seed=seed, pipeline=pipeline,
                           microbatches=microbatches if microbatches is not None else (4 if pipeline > 1 else 1),
                           injections=tuple(parse_injection(t) for t in inject or ()))
    edits = [parse_edit(text) for text in whatif or ()]
    for edit in edits:
        apply_capture_edit(config, edit)  # refuse a bad edit before training anything
    with Console(stderr=True).status(f"training {ranks} rank(s) for {steps} steps under the profiler"
                                     + (f", then {len(edits)} re-capture(s)..." if edits else "...")):
        results = capture_whatif(out_dir, config, edits) if edits else []
        manifest = results[0].baseline if results else capture(out_dir, config)
    console = Console()
    console.print(f"wrote {len(manifest.traces)} trace(s) and manifest.json to {out_dir} "
                  f"in {manifest.capture_s:.1f} s")
    for truth in manifest.ground_truth:
        console.print(f"  injected {truth.category} at step {truth.step} on rank(s) "
                      f"{','.join(map(str, truth.ranks))}: {truth.size:g} {truth.unit}")
    for text, result in zip(whatif or (), results):
        console.print(f"  what if {text}: {result.speedup():.2f}x the speed (traces in {out_dir / result.folder})")


def _print_json(data: object) -> None:
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


def _embedded_only(settings: Settings) -> None:
    if settings.graph_url != EMBEDDED_GRAPH_URL:
        raise ConfigError(f"ORACLE_GRAPH_URL is {settings.graph_url}: only the embedded server is started and "
                          "stopped by oracle")


@db_app.command("start")
def db_start_command() -> None:
    """Start the workspace's FalkorDB server (or report the one running)."""
    settings = Settings.from_env()
    _embedded_only(settings)
    with Console(stderr=True).status("starting FalkorDB..."):
        info = start_server(settings.home)
    state = "started" if info.is_new else "already running"
    Console().print(f"FalkorDB {state} at 127.0.0.1:{info.port} (pid {info.pid}); data in {info.files.data}")


@db_app.command("stop")
def db_stop_command() -> None:
    """Save a snapshot and stop the workspace's FalkorDB server."""
    settings = Settings.from_env()
    _embedded_only(settings)
    with Console(stderr=True).status("saving and stopping FalkorDB..."):
        stopped = stop_server(settings.home)
    Console().print("FalkorDB stopped; snapshot saved" if stopped else "FalkorDB was not running")


@db_app.command("status")
def db_status_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Say whether the graph database runs, where, and what it holds."""
    settings = Settings.from_env()
    info = server_status(settings.home) if settings.graph_url == EMBEDDED_GRAPH_URL else None
    data: dict[str, object] = {"url": settings.graph_url, "running": info is not None}
    if info is not None:
        data |= {"pid": info.pid, "port": info.port, "data": str(info.files.data),
                 "snapshot_bytes": info.files.rdb.stat().st_size if info.files.rdb.exists() else 0}
    if info is not None or settings.graph_url != EMBEDDED_GRAPH_URL:
        with open_store(settings) as store:
            data["traces"] = len(list_traces(store))
    if as_json:
        _print_json(data)
        return
    if settings.graph_url == EMBEDDED_GRAPH_URL and info is None:
        Console().print("FalkorDB is not running (start it with `oracle db start`)")
        return
    Console().print("  ".join(f"{k}: {v}" for k, v in data.items()))


@app.command("ingest")
def ingest_command(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or folders (one file per rank; .json or .json.gz).")],
    detail: Annotated[Detail, typer.Option(help="full: every op; critical: critical paths and their neighbourhood; "
                                                "summary: steps and findings.")] = Detail.FULL,
    hops: Annotated[int, typer.Option(help="Neighbourhood radius around the critical paths (--detail critical).")] = 1,
    partial: Annotated[bool, typer.Option(help="Accept a job whose files miss some ranks.")] = False,
    predict: Annotated[bool, typer.Option(help="Store the graph model's step times and op criticality too.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Analyze a trace and load it into the graph database (starting the embedded one if needed)."""
    settings = Settings.from_env()
    err = Console(stderr=True)
    with err.status("reading traces..."):
        trace = read_trace(paths, workers=settings.workers, partial=partial)
    with err.status("analysing..."):
        a = analyze(trace)
        tid = trace_id(trace)
    with open_store(settings, start=True) as store:
        store.apply_schema()
        with err.status("loading the optimization playbook..."):
            graph_playbook.ensure_playbook(store, graph_playbook.read_playbook())
        columns = (TextColumn("loading"), BarColumn(), MofNCompleteColumn(), TextColumn("batches"), TimeElapsedColumn())
        with Progress(*columns, console=err, transient=True, disable=as_json) as bar:
            task = bar.add_task("load", total=None)
            report = load_analysis(store, a, trace_id=tid, name=trace_name(paths), detail=detail, hops=hops,
                                   progress=lambda done, total: bar.update(task, completed=done, total=total))
        predictions = 0
        if predict:
            with err.status("predicting with the graph model..."):
                for prediction in model_predictions(a, tid):
                    load_prediction(store, prediction)
                    predictions += 1
    if as_json:
        _print_json({"trace_id": report.trace_id, "detail": report.detail.value, "outcome": report.outcome,
                     "nodes": report.nodes, "relationships": report.relationships, "batches": report.batches,
                     "resumed_after": report.resumed_after, "seconds": round(report.seconds, 3),
                     "predictions": predictions})
        return
    what = {"loaded": "loaded", "resumed": f"finished an interrupted load (from batch {report.resumed_after + 1})",
            "unchanged": "already loaded, nothing to do"}[report.outcome]
    Console().print(f"{trace_name(paths)}: {what}: trace {report.trace_id} ({report.detail.value}), "
                    f"{report.nodes:,} nodes and {report.relationships:,} relationships in {report.seconds:.1f} s")


@app.command("traces")
def traces_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """List the traces loaded in the graph database."""
    with open_store(Settings.from_env()) as store:
        traces = list_traces(store)
    if as_json:
        _print_json([{"trace_id": t.trace_id, "name": t.name, "status": t.status, "detail": t.detail.value,
                      "ranks": t.ranks, "steps": t.steps, "ops": t.ops, "relationships": t.relationships,
                      "loaded_at": t.loaded_at} for t in traces])
        return
    if not traces:
        Console().print("No trace loaded (load one with `oracle ingest PATH`).")
        return
    table = Table(title="Traces in the graph database", title_justify="left")
    for col in ("trace", "name", "status", "detail", "ranks", "steps", "ops", "relationships", "loaded"):
        table.add_column(col, justify="right" if col in ("ranks", "steps", "ops", "relationships") else "left")
    for t in traces:
        loaded = time.strftime("%Y-%m-%d %H:%M", time.localtime(t.loaded_at)) if t.loaded_at else "-"
        status = t.status if t.status == "complete" else f"[bold yellow]{t.status}[/] (ingest again to finish)"
        table.add_row(t.trace_id, t.name, status, t.detail.value, str(t.ranks), str(t.steps), f"{t.ops:,}",
                      f"{t.relationships:,}", loaded)
    Console().print(table)


@app.command("synth")
def synth_command(
    out_dir: Annotated[Path, typer.Argument(help="Folder for rank{r}.pt.trace.json.gz and manifest.json.")],
    model: Annotated[str, typer.Option(help="tiny, gpt2-small, 1b, 7b or 13b.")] = "tiny",
    hardware: Annotated[str, typer.Option(help="A100, H100 or H200.")] = "H100",
    ranks: Annotated[Optional[int], typer.Option(
        help="Ranks (GPUs); sets the data-parallel degree to RANKS / (tp x pp) when --dp is not given.")] = None,
    dp: Annotated[Optional[int], typer.Option(help="Data-parallel degree (default 1, or from --ranks).")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages (1F1B).")] = 1,
    microbatches: Annotated[int, typer.Option(help="Micro-batches per step.")] = 1,
    steps: Annotated[int, typer.Option(help="Recorded steps.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the kernel-time noise.")] = 0,
    inject: Annotated[Optional[list[str]], typer.Option(
        help="CATEGORY@STEP[:RANK,...][=SIZE], repeatable; any category of the bottleneck vocabulary.")] = None,
    whatif: Annotated[Optional[list[str]], typer.Option(
        help="Re-simulate with one change, repeatable: collective_faster:KIND[=K], kernel_faster:CLASS[=K], "
             "microbatches[=K], data_parallel=D, remove_injection[=I]; true step times go to whatif.json.")] = None,
) -> None:
    """Generate the traces of a simulated GPU-cluster LLM training job, with ground truth."""
    from bottleneck_oracle.traces.injection import parse_injection
    from bottleneck_oracle.traces.synth import SynthConfig, parse_edit, synthesize
    from bottleneck_oracle.traces.synth import whatif as simulate_whatif
    from bottleneck_oracle.traces.synth.whatif import apply_edit, whatif_to_json, write_whatif

    dp = _data_parallel(ranks, dp, tp, pp)
    config = SynthConfig(model=model, hardware=hardware, dp=dp, tp=tp, pp=pp, microbatches=microbatches,
                         steps=steps, seed=seed, injections=tuple(parse_injection(t) for t in inject or ()))
    edits = [parse_edit(text) for text in whatif or ()]
    for edit in edits:
        apply_edit(config, edit)  # refuse a bad edit before simulating anything
    with Console(stderr=True).status(f"simulating {config.ranks} rank(s) for {steps} steps..."):
        manifest = synthesize(out_dir, config, workers=Settings.from_env().workers)
        results = [simulate_whatif(config, edit) for edit in edits]
    if results:
        write_whatif(out_dir, [whatif_to_json(result) for result in results])
    console = Console()
    console.print(f"wrote {len(manifest.traces)} trace(s), {manifest.events:,} events, and manifest.json to {out_dir}")
    for truth in manifest.ground_truth:
        console.print(f"  injected {truth.category} at step {truth.step} on rank(s) "
                      f"{','.join(map(str, truth.ranks))}: {truth.size:g} {truth.unit} (+{truth.injected_ms:.1f} ms)")
    for text, result in zip(whatif or (), results):
        console.print(f"  what if {text}: {result.speedup():.2f}x the speed (true step times in whatif.json)")


def _data_parallel(ranks: int | None, dp: int | None, tp: int, pp: int) -> int:
    """The data-parallel degree from --dp, or from --ranks over tp x pp; both must agree."""
    if ranks is None:
        return 1 if dp is None else dp
    if ranks < 1 or ranks % (tp * pp):
        raise ConfigError(f"--ranks {ranks} is not a multiple of tp x pp = {tp * pp}")
    if dp is not None and dp * tp * pp != ranks:
        raise ConfigError(f"--ranks {ranks} does not equal dp x tp x pp = {dp * tp * pp}")
    return ranks // (tp * pp)


@dataset_app.command("build")
def dataset_build_command(
    out_dir: Annotated[Path, typer.Argument(help="Corpus folder (SPLIT/SAMPLE/ per trace, index.json).")],
    n: Annotated[int, typer.Option("--n", help="Number of traces.")] = 200,
    seed: Annotated[int, typer.Option(help="Decides the plan, the family split and every trace's noise.")] = 0,
) -> None:
    """Build (or resume) a corpus split by configuration family, with an out-of-distribution split."""
    from rich.progress import Progress

    from bottleneck_oracle.traces.dataset import build_dataset

    with Progress(console=Console(stderr=True)) as progress:
        task = progress.add_task("generating traces", total=n)
        index = build_dataset(out_dir, n, seed, workers=Settings.from_env().workers,
                              progress=lambda done, total, sid: progress.update(task, completed=done))
    counts = {split: sum(1 for e in index if e["split"] == split) for split in ("train", "val", "test", "ood")}
    Console().print(f"{len(index)} traces in {out_dir}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


def _bar(console: Console, what: str) -> Progress:
    return Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                    TimeElapsedColumn(), console=console, transient=True)


def _load_split(data: Path, split: str, console: Console, bidirectional: bool = True) -> list:  # type: ignore[type-arg]
    from bottleneck_oracle.gnn.corpus import load_split

    with _bar(console, f"reading {split}") as bar:
        task = bar.add_task("", total=None)
        return load_split(data, split, bidirectional=bidirectional,
                          progress=lambda done, total, sid: bar.update(task, completed=done, total=total,
                                                                       description=sid))


@app.command("train")
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
    from bottleneck_oracle.gnn.train import TrainConfig, save_checkpoint, train

    err = Console(stderr=True)
    train_set = _load_split(data, "train", err, bidirectional=not directed)
    val_set = _load_split(data, "val", err, bidirectional=not directed)
    config = TrainConfig(epochs=epochs, patience=patience, seed=seed, hidden=hidden, layers=layers,
                         bidirectional=not directed, max_minutes=max_minutes, refit_steps=refit_steps)
    with _bar(err, "training") as bar:
        task = bar.add_task("", total=epochs)

        def progress(epoch: int, total: int, loss: float, score: float) -> None:
            line = f"epoch {epoch}/{total}: loss {loss:.4f}, val score {score:.4f}"
            bar.update(task, completed=epoch, description=line)
            if not err.is_terminal:  # a log file gets a line per epoch instead of a bar
                err.print(line)

        ckpt = train(train_set, val_set, config, progress=progress)
    save_checkpoint(ckpt, out)
    Console(soft_wrap=True).print(f"{out}: trained on {len(train_set)} traces in {ckpt.train['seconds']} s, "
                                  f"best validation score {ckpt.train['best_val_score']:.4f} "
                                  "(step-time error plus the walk's miss of the critical path)")


@app.command("gnn-eval")
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
    from bottleneck_oracle.gnn.baselines import AggregateRegressors
    from bottleneck_oracle.gnn.evaluate import (
        evaluate, plot, preferred_predictors, to_markdown, weaker_than_baselines,
    )
    from bottleneck_oracle.gnn.predict import Predictor

    err = Console(stderr=True)
    predictor = Predictor(checkpoint)
    rows = predictor.checkpoint.baseline_rows
    regressors = AggregateRegressors(*rows) if rows is not None else None
    results = {}
    if (data / "index.json").is_file():
        chosen = {split: _load_split(data, split, err, predictor.model.config.bidirectional)
                  for split in [s.strip() for s in splits.split(",") if s.strip()]}
    else:  # real captures: no split, their what-if truth comes from re-captures
        from bottleneck_oracle.gnn.corpus import load_captures

        with err.status("reading captures..."):
            chosen = {"captured": load_captures(data)}
    for split, samples in chosen.items():
        if not samples:
            err.print(f"{split}: no samples, skipped")
            continue
        with _bar(err, f"scoring {split}") as bar:
            task = bar.add_task("", total=len(samples))
            results[split] = evaluate(samples, predictor, regressors,
                                      progress=lambda done, total, sid: bar.update(task, completed=done))
    if not results:
        raise ConfigError(f"{data}: none of the splits {splits!r} holds a sample")
    if plots is not None:
        plot(results, plots)
    notes = {split: weaker_than_baselines(r) for split, r in results.items()}
    if record:
        from bottleneck_oracle.gnn.predict import SHIPPED_CHECKPOINT
        from bottleneck_oracle.gnn.train import record_metrics

        first = next(iter(results.values()))
        record_metrics(checkpoint or SHIPPED_CHECKPOINT, {
            "splits": {s: {k: v for k, v in r.items() if k != "points"} for s, r in results.items()},
            "preferred": preferred_predictors(first)})
    if as_json:
        first = next(iter(results.values()))
        body = {k: v for k, v in first.items() if k != "points"}
        body["splits"] = {s: {k: v for k, v in r.items() if k != "points"} for s, r in results.items()}
        body["weaker_than_baselines"] = notes
        _print_json(body)
        return
    console = Console()
    console.print(to_markdown(results), highlight=False)
    for split, lines in notes.items():
        for line in lines:
            console.print(f"{split}: {line}", highlight=False)


def main() -> None:
    """Entry point: bad input exits 2 and an internal failure 1, each with a one-line reason."""
    try:
        app()  # usage errors exit 2 inside, as click does
    except OracleError as e:
        _print_error(str(e))
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 - the one place that turns a bug into exit 1
        _print_error(f"internal error: {type(e).__name__}: {e}")
        sys.exit(1)


def _print_error(message: str) -> None:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
