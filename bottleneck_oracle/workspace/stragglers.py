"""Stragglers of a pipeline-parallel job, for the CLI, the agent's tools and the HTTP API alike: read its op
table (parquet or CSV with a ``meta.yaml``) or derive it from the job's Kineto traces, run the what-if
analysis, and write the heatmap and timelines asked for."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, SetupError
from bottleneck_oracle.executor import executor_of
from bottleneck_oracle.graph.pipeline import build_job_graph
from bottleneck_oracle.job.straggler_edits import pipeline_whatif
from bottleneck_oracle.job.straggler_report import straggler_json, timeline_events
from bottleneck_oracle.job.straggler_verdict import heat, straggler_verdict
from bottleneck_oracle.job.stragglers import StragglerAnalysis, analyze_stragglers
from bottleneck_oracle.traces.op_table import JobLayout, OpTable, op_table_from_arrow, read_op_table
from bottleneck_oracle.truth.edits import parse_edit

__all__ = ["load_op_table", "straggler_analysis", "straggler_report", "write_heatmap"]


def load_op_table(path: Path | str, layout: JobLayout | None = None) -> OpTable:
    """The op table at ``path``: a ``.parquet``/``.csv`` file or a folder holding one, else a folder of the job's
    Kineto traces (our pipeline captures' or Megatron's range names).

    Raises:
        ConfigError: no such path; TraceFormatError: not an op table nor traces one can be derived from.
    """
    path = Path(path)
    tables = [p for p in path.iterdir() if p.suffix in (".parquet", ".csv")] if path.is_dir() else []
    if path.is_dir() and not tables and any(p.name.endswith((".json", ".json.gz")) for p in path.iterdir()):
        from bottleneck_oracle.traces.op_table_kineto import op_table_from_kineto

        table, meta = op_table_from_kineto(path, stages=layout.pp if layout else None, layout=layout)
        derived = JobLayout(meta["dp_size"], meta["pp_size"], name=str(meta.get("trial_name") or path.name))
        return op_table_from_arrow(table, layout or derived, str(path))
    return read_op_table(path, layout)


def straggler_analysis(path: Path | str, settings: Settings, layout: JobLayout | None = None) -> StragglerAnalysis:
    """The what-if analysis of the job at ``path`` (attribution replays on the settings' executor)."""
    table = load_op_table(path, layout)
    return analyze_stragglers(build_job_graph(table), executor_of(settings))


def straggler_report(path: Path | str, settings: Settings, *, layout: JobLayout | None = None,
                     edits: Sequence[str] = (), heatmap: Path | None = None, timeline: Path | None = None,
                     timeline_steps: int = 3) -> dict[str, Any]:
    """``oracle stragglers``: the analysis as JSON-ready data, each group of ``edits`` (strings of the edit
    language, ``;`` between edits replayed together) predicted and ranked, and the files asked for.

    Raises:
        ConfigError: a bad edit or layout; TraceFormatError: a bad table; SetupError: no matplotlib for
            the heatmap.
    """
    groups = [[parse_edit(e) for e in text.split(";") if e.strip()] for text in edits]
    if any(not g for g in groups):
        raise ConfigError("--whatif: an empty edit")
    a = straggler_analysis(path, settings, layout)
    out = straggler_json(a, straggler_verdict(a), [pipeline_whatif(a, g) for g in groups])
    if heatmap is not None:
        write_heatmap(a, Path(heatmap))
        out["heatmap_png"] = str(heatmap)
    if timeline is not None:
        Path(timeline).write_text(json.dumps({"traceEvents": timeline_events(a, timeline_steps),
                                              "displayTimeUnit": "ms"}))
        out["timeline_json"] = str(timeline)
    return out


def write_heatmap(a: StragglerAnalysis, path: Path) -> None:
    """A PNG of each worker's slowdown score, DP rank across and stage down, as the study draws it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        raise SetupError("--heatmap needs matplotlib: pip install matplotlib (or make setup)") from None
    grid = heat(a).T  # stages as rows
    layout = a.graph.table.layout
    fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * layout.dp + 2), max(2.0, 0.5 * layout.pp + 1.2)))
    top = max(1.5, float(grid.max()))
    image = ax.imshow(grid, cmap="Reds", vmin=1.0, vmax=top, aspect="auto")
    if layout.dp * layout.pp <= 128:
        for s, d in np.ndindex(grid.shape):  # white on the dark cells
            ax.text(d, s, f"{grid[s, d]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if grid[s, d] > 1 + 0.6 * (top - 1) else "black")
    ax.set_yticks(range(layout.pp))
    if layout.dp <= 32:
        ax.set_xticks(range(layout.dp))
    ax.set_xlabel("DP rank")
    ax.set_ylabel("PP stage")
    ax.set_title(f"{layout.name or 'job'}: slowdown per worker (S = {a.slowdown:.2f})", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight", dpi=110)
    plt.close(fig)
