"""``oracle capture``, ``oracle synth`` and ``oracle dataset build``: traces with ground truth, recorded
from a real job or simulated. Torch and the simulator load only when their command runs."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bottleneck_oracle.cli._render import bar, spinner, stderr, stdout
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.truth.manifest import GroundTruth

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["capture_command", "dataset_build_command", "synth_command"]


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
    stage_layers: Annotated[Optional[str], typer.Option(
        help="Blocks per pipeline stage, first stage first, e.g. 1,3 (an unbalanced pipeline); they must sum "
             "to --layers. Default: an even split.")] = None,
    whatif: Annotated[Optional[list[str]], typer.Option(
        help="Re-capture with one change, repeatable: remove_injection[=I], 'fix CATEGORY', microbatches=K, "
             "data_parallel=D; true step times go to whatif.json.")] = None,
    pin_cpus: Annotated[bool, typer.Option(
        "--pin-cpus", help="Pin rank r to CPU r mod the CPU count, as each rank owns its device in a job.")] = False,
) -> None:
    """Train a small GPT with DDP (or pipeline stages) under torch.profiler and write one trace per rank."""
    from bottleneck_oracle.capture.capture import capture
    from bottleneck_oracle.capture.config import CaptureConfig, parse_injection
    from bottleneck_oracle.capture.whatif import apply_capture_edit, capture_whatif

    config = CaptureConfig(ranks=ranks, steps=steps, layers=layers, d_model=d_model, seq_len=seq_len,
                           batch_size=batch_size, seed=seed, pipeline=pipeline,
                           microbatches=microbatches if microbatches is not None else (4 if pipeline > 1 else 1),
                           stage_layers=_stage_layers(stage_layers), pin_cpus=pin_cpus,
                           injections=tuple(parse_injection(t) for t in inject or ()))
    edits = [parse_edit(text) for text in whatif or ()]
    for edit in edits:
        apply_capture_edit(config, edit)  # refuse a bad edit before training anything
    with spinner(stderr(), f"training {ranks} rank(s) for {steps} steps under the profiler"
                         + (f", then {len(edits)} re-capture(s)..." if edits else "...")):
        results = capture_whatif(out_dir, config, edits) if edits else []
        manifest = results[0].baseline if results else capture(out_dir, config)
    console = stdout()
    console.print(f"wrote {len(manifest.traces)} trace(s) and manifest.json to {out_dir} "
                  f"in {manifest.capture_s:.1f} s")
    _print_truth(console, manifest.ground_truth, measured=False)
    for text, result in zip(whatif or (), results):
        console.print(f"  what if {text}: {result.speedup():.2f}x the speed (traces in {out_dir / result.folder})")


def _stage_layers(text: str | None) -> tuple[int, ...]:
    """``--stage-layers 1,3`` as ``(1, 3)``; the config checks the counts against the stages and layers."""
    if not text:
        return ()
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"--stage-layers {text!r}: give whole numbers separated by commas, e.g. 1,3") from None


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
        help="Re-simulate with one change, repeatable: 'scale op=CLASS xK' (a kernel class or collective), "
             "'fix CATEGORY', microbatches=K, data_parallel=D, remove_injection[=I]; true step times go to "
             "whatif.json.")] = None,
    op_table: Annotated[bool, typer.Option(
        "--op-table", help="Write a pipeline job's op table instead (trace.parquet, meta.yaml, truth.json; for "
                           "oracle stragglers) from --dp, --pp, --tp, --microbatches, --steps, --seed and the "
                           "straggler flags below.")] = False,
    slow_worker: Annotated[Optional[list[str]], typer.Option(
        help="With --op-table: DP_RANK:STAGE=FACTOR, a worker whose computes take FACTOR times as long; "
             "repeatable.")] = None,
    slow_stage: Annotated[Optional[list[str]], typer.Option(
        help="With --op-table: STAGE=FACTOR, a stage whose computes take FACTOR times as long; repeatable.")] = None,
    uneven_microbatches: Annotated[float, typer.Option(
        help="With --op-table: the coefficient of variation of each micro-batch's work (sequence lengths).")] = 0.0,
) -> None:
    """Generate the traces of a simulated GPU-cluster LLM training job, with ground truth."""
    from bottleneck_oracle.synth import SynthConfig
    from bottleneck_oracle.synth.whatif import synthesize_with_whatifs
    from bottleneck_oracle.truth.injection import parse_injection

    if op_table:
        _synth_op_table(out_dir, _data_parallel(ranks, dp, tp, pp), tp, pp, microbatches, steps, seed,
                        slow_worker or (), slow_stage or (), uneven_microbatches, bool(inject or whatif))
        return
    config = SynthConfig(model=model, hardware=hardware, dp=_data_parallel(ranks, dp, tp, pp), tp=tp, pp=pp,
                         microbatches=microbatches, steps=steps, seed=seed,
                         injections=tuple(parse_injection(t) for t in inject or ()))
    edits = [parse_edit(text) for text in whatif or ()]
    with spinner(stderr(), f"simulating {config.ranks} rank(s) for {steps} steps..."):
        manifest, results = synthesize_with_whatifs(out_dir, config, edits, workers=Settings.from_env().workers)
    console = stdout()
    console.print(f"wrote {len(manifest.traces)} trace(s), {manifest.events:,} events, and manifest.json to {out_dir}")
    _print_truth(console, manifest.ground_truth, measured=True)
    for text, result in zip(whatif or (), results):
        console.print(f"  what if {text}: {result.speedup():.2f}x the speed (true step times in whatif.json)")


def _synth_op_table(out_dir: Path, dp: int, tp: int, pp: int, microbatches: int, steps: int, seed: int,
                    workers: Sequence[str], stages: Sequence[str], uneven: float, other_flags: bool) -> None:
    """``oracle synth --op-table``: a synthetic pipeline job's op table with its truth (``synth/straggler_jobs``)."""
    from bottleneck_oracle.synth.straggler_jobs import StragglerJobSpec, write_job

    if other_flags:
        raise ConfigError("--op-table: --inject and --whatif are for traces; use --slow-worker, --slow-stage and "
                          "--uneven-microbatches")

    def numbers(text: str, form: str, parts: int) -> tuple[float, ...]:
        found = re.fullmatch(r"(\d+)(?::(\d+))?=([0-9.]+)", text.strip())
        if not found or (found[2] is None) != (parts == 2):
            raise ConfigError(f"{text!r}: expected {form}")
        return tuple(float(x) for x in found.groups() if x is not None)

    spec = StragglerJobSpec(
        dp=dp, pp=pp, tp=tp, microbatches=microbatches, steps=steps, seed=seed,
        slow_workers=tuple((int(d), int(s), f) for d, s, f in (numbers(w, "DP_RANK:STAGE=FACTOR", 3)
                                                                for w in workers)),
        slow_stages=tuple((int(s), f) for s, f in (numbers(t, "STAGE=FACTOR", 2) for t in stages)),
        uneven_microbatches=uneven)
    with spinner(stderr(), f"generating {dp * pp * tp:,} workers' op table..."):
        write_job(spec, out_dir)
    truth = json.loads((out_dir / "truth.json").read_text())
    stdout().print(f"wrote trace.parquet, meta.yaml and truth.json to {out_dir}: DP {dp} x PP {pp} x TP {tp}, "
                   f"{steps} steps; truth: {truth['cause']}", highlight=False)


def _print_truth(console: Console, truths: tuple[GroundTruth, ...], measured: bool) -> None:
    for truth in truths:
        added = f" (+{truth.injected_ms:.1f} ms)" if measured else ""
        console.print(f"  injected {truth.category} at step {truth.step} on rank(s) "
                      f"{','.join(map(str, truth.ranks))}: {truth.size:g} {truth.unit}{added}")


def _data_parallel(ranks: int | None, dp: int | None, tp: int, pp: int) -> int:
    """The data-parallel degree from --dp, or from --ranks over tp x pp; both must agree."""
    if ranks is None:
        return 1 if dp is None else dp
    if ranks < 1 or ranks % (tp * pp):
        raise ConfigError(f"--ranks {ranks} is not a multiple of tp x pp = {tp * pp}")
    if dp is not None and dp * tp * pp != ranks:
        raise ConfigError(f"--ranks {ranks} does not equal dp x tp x pp = {dp * tp * pp}")
    return ranks // (tp * pp)


def dataset_build_command(
    out_dir: Annotated[Path, typer.Argument(help="Corpus folder (SPLIT/SAMPLE/ per trace, index.json).")],
    n: Annotated[int, typer.Option("--n", help="Number of traces.")] = 200,
    seed: Annotated[int, typer.Option(help="Decides the plan, the family split and every trace's noise.")] = 0,
) -> None:
    """Build (or resume) a corpus split by configuration family, with an out-of-distribution split."""
    from bottleneck_oracle.synth.dataset import SPLITS, build_dataset

    with bar(stderr(), "generating traces") as progress:
        task = progress.add_task("", total=n)
        index = build_dataset(out_dir, n, seed, workers=Settings.from_env().workers,
                              progress=lambda done, total, sid: progress.update(task, completed=done))
    counts = {split: sum(1 for e in index if e["split"] == split) for split in SPLITS}
    stdout().print(f"{len(index)} traces in {out_dir}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
