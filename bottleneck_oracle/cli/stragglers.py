"""``oracle stragglers``: how much faster a pipeline-parallel job would run without its stragglers, and who they are."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bottleneck_oracle.cli._executor import ExecutorOption, RayAddressOption, settings_for
from bottleneck_oracle.cli._render import paragraph, print_json, spinner, stderr, stdout

__all__ = ["stragglers_command"]

_SHOWN = 5  # attribution entries per dimension in the human output


def stragglers_command(
    path: Annotated[Path, typer.Argument(help="An op table of a pipeline job (.parquet or .csv; a folder holding "
                                              "one and its meta.yaml), or a folder of its Kineto traces.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the analysis as JSON.")] = False,
    dp: Annotated[Optional[int], typer.Option(help="Data-parallel size (default: meta.yaml).")] = None,
    pp: Annotated[Optional[int], typer.Option(help="Pipeline stages (default: meta.yaml).")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel size, with --dp/--pp.")] = 1,
    dsp: Annotated[int, typer.Option(help="Sequence-parallel size, with --dp/--pp.")] = 1,
    vpp: Annotated[int, typer.Option(help="Model chunks per stage (interleaved 1F1B), with --dp/--pp.")] = 1,
    whatif: Annotated[Optional[list[str]], typer.Option(
        "--whatif", help="An edit to predict, repeatable and ranked by saving: 'fix straggler_rank rank=37', "
                         "'fix straggler_rank' (no stragglers), 'move_layer 3->0 layers=8', 'even_microbatches', "
                         "'scale rank=5 name=compute x1.5'; several joined by ';' replay together.")] = None,
    heatmap: Annotated[Optional[Path], typer.Option(help="Write the heatmap of S per worker as a PNG here.")] = None,
    timeline: Annotated[Optional[Path], typer.Option(help="Write the recorded and ideal timelines of the first "
                                                          "steps here (Perfetto-loadable JSON).")] = None,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Who holds a pipeline job back (a slow worker, an unbalanced stage, uneven micro-batches), what each fix buys."""
    from bottleneck_oracle.errors import ConfigError
    from bottleneck_oracle.traces.op_table import JobLayout
    from bottleneck_oracle.workspace.stragglers import straggler_report

    if (dp is None) != (pp is None):
        raise ConfigError("--dp and --pp: give both (or neither, to read meta.yaml)")
    layout = None if dp is None else JobLayout(dp, pp, tp, dsp, vpp, name=path.stem)  # type: ignore[arg-type]
    with spinner(stderr(), f"replaying {path.name}"):
        report = straggler_report(path, settings_for(executor, ray_address), layout=layout, edits=whatif or (),
                                  heatmap=heatmap, timeline=timeline)
    if as_json:
        print_json(report)
    else:
        _print_text(report)


def _top(values: dict[str, float]) -> str:
    shown = list(values.items())[:_SHOWN]
    return ", ".join(f"{k} {v:.3f}" for k, v in shown) + (" ..." if len(values) > _SHOWN else "")


def _print_text(r: dict[str, Any]) -> None:
    console = stdout()
    job, times = r["job"], r["step_time_s"]
    head = {"none": "NO STRAGGLERS", "slow_worker": "SLOW WORKER", "stage_imbalance": "STAGE IMBALANCE",
            "uneven_microbatches": "UNEVEN WORK", "unexplained": "SLOW"}[r["cause"]]
    paragraph(console, f"{head}: {r['headline']}", 0, hang=2)
    paragraph(console, f"job: {job['name'] or Path(job['source']).parent.name}, DP {job['dp_size']} x PP "
                       f"{job['pp_size']} x TP {job['tp_size']}"
                       + (f" x DSP {job['dsp_size']}" if job["dsp_size"] > 1 else "")
                       + f" = {job['world_size']} workers, {len(job['steps'])} steps"
                       + (f" ({len(job['dropped_steps'])} dropped: incomplete)" if job["dropped_steps"] else ""), 2, 4)
    paragraph(console, f"step time: {times['recorded']:.3f} s recorded, {times['no_launch_gaps']:.3f} s without "
                       f"launch gaps, {times['ideal']:.3f} s ideal; S = {r['slowdown']:.3f} (replay residual "
                       f"{r['replay_residual']:.2%})", 2, 4)
    paragraph(console, f"by DP rank: {_top(r['by_dp_rank'])}", 2, 4)
    paragraph(console, f"by stage: {_top(r['by_stage'])}", 2, 4)
    paragraph(console, f"by op type: {_top(r['by_op_type'])}", 2, 4)
    paragraph(console, f"shares of the gap: worker M_W {r['worker_share']:.2f}, last stage M_S "
                       f"{r['stage_share']:.2f}, stage {r['worst_stage']} {r['shares']['worst_stage']['removed']:.2f}, "
                       f"even work {r['work_share']:.2f}", 2, 4)
    for fix in r["fixes"]:
        lo, hi = fix["interval_s"]
        paragraph(console, f"fix: {fix['action']}: step {fix['predicted_step_s']:.3f} s ({lo:.3f} to {hi:.3f}), "
                           f"saves {fix['saving_s']:.3f} s ({fix['saving_pct']:.1f}%)", 2, 4)
    for w in r["whatif"]:
        lo, hi = w["interval_s"]
        paragraph(console, f"what if {'; '.join(w['edits'])}: step {w['predicted_step_s']:.3f} s ({lo:.3f} to "
                           f"{hi:.3f}), saves {w['saving_s']:.3f} s ({w['saving_pct']:.1f}%)", 2, 4)
    for key, what in (("heatmap_png", "heatmap"), ("timeline_json", "timelines")):
        if key in r:
            paragraph(console, f"{what}: {r[key]}", 2, 4)
