"""The agent's tools: LangChain tools with typed arguments, each a thin call into the service layer
(``workspace/``), the retrieval layer (``retrieval/``) or the graph database's read-only path.

Every tool returns one JSON document as text. A tool that fails returns ``{"error": "..."}`` with
the one-line reason the CLI would print, so the agent can act on it (a step that does not exist
lists those that do). The same tools are served over MCP (``agent/mcp_server.py``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, OracleError
from bottleneck_oracle.graphdb import GraphStore, list_traces, open_store
from bottleneck_oracle.truth.edits import format_edit
from bottleneck_oracle.workspace import questions as next_questions
from bottleneck_oracle.workspace import steps as step_questions
from bottleneck_oracle.workspace.diff import diff_traces
from bottleneck_oracle.workspace.hang import hang_report
from bottleneck_oracle.workspace.loaded import LoadedTrace, loaded_trace
from bottleneck_oracle.workspace.stragglers import straggler_report
from bottleneck_oracle.workspace.whatif import model_is_scored, optimize_trace, whatif_trace

__all__ = ["TOOL_NAMES", "ToolContext", "args_key", "make_tools"]

MAX_RESULT_CHARS = 12_000  # what one tool result may put into the model's context
TOP_WORKERS = 8  # workers and DP ranks a straggler report keeps for the model, slowest first


@dataclass
class ToolContext:
    """What the tools of one conversation share: the settings, the trace asked about (default: the
    newest loaded) and one open graph database connection."""

    settings: Settings
    trace: str | None = None
    dumps: str | None = None  # a folder of Flight Recorder dumps, for questions about a hang
    pipeline: str | None = None  # a pipeline job's op table, for questions about its stragglers
    stage: Callable[[str], None] | None = None
    timings: list[tuple[str, str, float]] = field(default_factory=list, repr=False)  # (tool, args JSON, ms)
    _store: GraphStore | None = field(default=None, repr=False)
    _traces: dict[str, LoadedTrace] = field(default_factory=dict, repr=False)
    # a round's tools run at once: the first to need the trace loads it, the others wait for it
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def store(self) -> GraphStore:
        with self._lock:
            if self._store is None:
                self._store = open_store(self.settings, start=True)
            return self._store

    def resolve(self, ref: str | None = None) -> LoadedTrace:
        """The trace ``ref`` names (default: the conversation's trace), loaded into the database once, however
        many tools of a round ask for it at the same time."""
        key = ref or self.trace or ""
        store = self.store()
        with self._lock:
            if key not in self._traces:
                self._traces[key] = loaded_trace(store, key or None, self.settings, stage=self.stage)
            return self._traces[key]

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class _TraceArg(BaseModel):
    trace: str | None = Field(None, description="trace id, name or path; default: the trace of the conversation")


class _StepArgs(_TraceArg):
    step: int | None = Field(None, description="the ProfilerStep number; default: the slowest step")
    rank: int | None = Field(None, description="the rank; default: the step's slowest rank")


class _StepOnly(_TraceArg):
    step: int | None = Field(None, description="the ProfilerStep number; default: the slowest step")


class _SubgraphArgs(_StepArgs):
    hops: int = Field(1, ge=0, le=3, description="edges to follow out from the critical path")
    budget_tokens: int = Field(1500, ge=200, le=8000, description="size of the condensed context")


class _CompareStepsArgs(_TraceArg):
    step_a: int = Field(description="the reference step")
    step_b: int = Field(description="the step compared with it")
    rank: int | None = Field(None, description="the rank; default: step_b's slowest")


class _CompareRanksArgs(_StepOnly):
    rank_b: int = Field(description="the rank asked about")
    rank_a: int | None = Field(None, description="the reference rank; default: the step's typical rank (median wall)")


class _CompareRunsArgs(BaseModel):
    base: str = Field(description="the reference run: trace id, name or path")
    other: str = Field(description="the run compared with it: trace id, name or path")


class _SearchArgs(BaseModel):
    query: str = Field(description="what to look for, in words")
    k: int = Field(5, ge=1, le=20, description="how many results")


class _WhatIfArgs(_StepOnly):
    edit: str = Field(description="an edit: 'scale op=allreduce x2', 'remove name=REGEX', 'fix CATEGORY', "
                                  "'data_parallel=8', 'microbatches=4', ...")


class _OptimizeArgs(_StepOnly):
    budget: int = Field(3, ge=1, le=5, description="how many changes the plan may make")


class _PlaybookArgs(_SearchArgs):
    k: int = Field(3, ge=1, le=10, description="how many entries")
    category: str | None = Field(None, description="only entries for this bottleneck category (e.g. host_pause)")


class _RankArgs(_StepOnly):
    rank: int = Field(description="the rank that should behave like the others")


class _RunWhatIfArgs(_TraceArg):
    edit: str = Field(description="an edit, as for whatif: 'fix host_pause', 'scale op=allreduce x2', ...")


class _HangArgs(BaseModel):
    dumps: str | None = Field(None, description="Folder of the job's Flight Recorder dumps (default: the one "
                                                "the conversation was given).")
    traces: str | None = Field(None, description="Profiler traces of the same job, to say what the culprit did "
                                                 "in its last profiled step (a path, id or name).")


class _StragglerArgs(BaseModel):
    pipeline: str | None = Field(None, description="The pipeline job's op table: a .parquet or .csv file, or a "
                                                   "folder holding one and its meta.yaml (default: the one the "
                                                   "conversation was given).")
    whatif: list[str] = Field(default_factory=list, max_length=8, description=(
        "Edits to predict, each ranked by its saving: 'fix straggler_rank rank=37' (that worker healthy), "
        "'fix straggler_rank' (no stragglers at all), 'move_layer 3->0 layers=L' (a layer of stage 3 moved to "
        "stage 0; only when the user gives L, the layers each stage holds), 'even_microbatches' (equal work per "
        "micro-batch); edits joined by ';' replay together."))


class _NoArgs(BaseModel):
    pass


class _CypherArgs(BaseModel):
    query: str = Field(description="one read-only Cypher query; $trace is bound to the current trace's id")
    params: dict[str, str | int | float] = Field(default_factory=dict, description="query parameters")


def _lists(value: Any, parent: Any = None, key: Any = None) -> Iterator[tuple[Any, Any, list[Any]]]:
    """Every list inside ``value``, with the dict or list that holds it and its key there."""
    if isinstance(value, list):
        yield parent, key, value
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in children:
        yield from _lists(v, value, k)


def _fit(value: Any, limit: int) -> Any:
    """``value`` as plain JSON with its largest lists halved, from the end, until it fits ``limit`` characters
    (a tool lists the most telling first: the latest arrivals, the slowest ranks). Every key stays, so an answer
    written from the result finds what it reads, and ``KEY_omitted`` says how many items of a list went."""
    value = json.loads(json.dumps(value, default=str))
    while len(json.dumps(value)) > limit:
        parent, key, items = max(_lists(value), key=lambda p: len(json.dumps(p[2])), default=(None, None, []))
        if len(items) <= 1:
            break
        omitted = len(items) - len(items) // 2
        del items[len(items) // 2:]
        if isinstance(parent, dict):
            parent[f"{key}_omitted"] = parent.get(f"{key}_omitted", 0) + omitted
    return value


def _json(value: Any) -> str:
    text = json.dumps(value, default=str)
    if len(text) > MAX_RESULT_CHARS:  # cut to fit, still whole JSON with every key
        text = json.dumps(_fit(value, MAX_RESULT_CHARS))
    if len(text) > MAX_RESULT_CHARS:  # no list left to cut (one huge string): the head only
        text = json.dumps({"truncated": True, "head": text[:MAX_RESULT_CHARS]})
    return text


def args_key(args: dict[str, Any]) -> str:
    """The arguments of a call as one comparable text."""
    return json.dumps({k: v for k, v in args.items() if v is not None}, sort_keys=True, default=str)


def _guarded(ctx: ToolContext, name: str, fn: Callable[..., Any]) -> Callable[..., str]:
    def run(**kwargs: Any) -> str:
        start = time.perf_counter()
        try:
            return _json(fn(**kwargs))
        except OracleError as e:
            return _json({"error": str(e)})
        except Exception as e:  # noqa: BLE001 - a tool's failure is a message the agent reads, not a crash
            return _json({"error": f"internal error in {name}: {type(e).__name__}: {e}"})
        finally:
            ctx.timings.append((name, args_key(kwargs), round(1000 * (time.perf_counter() - start), 1)))
    return run


def _whatif_summary(p: Any) -> dict[str, Any]:
    moved = p.moved()
    return {"step": p.step, "edits": [format_edit(e) for e in p.edits],
            "baseline_ms": p.baseline_ms, "predicted_ms": p.predicted_ms, "chosen": p.chosen,
            "best_ms": p.best_ms, "gain_ms": p.gain_ms, "why": p.why, "assumptions": list(p.assumptions),
            "moved": {k: v[:5] if isinstance(v, list) else v for k, v in moved.items()},
            **p.interval_json()}


def _pipeline_brief(report: dict[str, Any], path: str) -> dict[str, Any]:
    """``oracle stragglers --json`` for the model: the path asked about first, the per-step tables and the heatmap
    left out, the workers and DP ranks cut to the slowest few (``KEY_omitted`` says how many went)."""
    out = {"pipeline": path}
    out |= {k: v for k, v in report.items() if k not in ("step_slowdown", "step_times_s", "heatmap")}
    for key in ("by_worker", "by_dp_rank"):
        items = list(report[key].items())
        out[key] = dict(items[:TOP_WORKERS])
        if len(items) > TOP_WORKERS:
            out[f"{key}_omitted"] = len(items) - TOP_WORKERS
    return out


def make_tools(ctx: ToolContext) -> list[BaseTool]:
    """The tools, bound to one conversation's context."""
    from bottleneck_oracle.graphdb.adhoc import run_read_only
    from bottleneck_oracle.retrieval import condense, critical_subgraph, playbook_search, similar_findings

    def traces_() -> dict[str, Any]:
        rows = list_traces(ctx.store())
        return {"traces": [{"trace_id": t.trace_id, "name": t.name, "status": t.status, "ranks": t.ranks,
                            "steps": t.steps, "loaded_at": t.loaded_at} for t in rows]}

    def steps_(trace: str | None = None) -> dict[str, Any]:
        return step_questions.list_steps(ctx.store(), ctx.resolve(trace))

    def explain(step: int | None = None, rank: int | None = None, trace: str | None = None) -> dict[str, Any]:
        return step_questions.explain_step(ctx.store(), ctx.resolve(trace), step, rank)

    def subgraph(step: int | None = None, rank: int | None = None, hops: int = 1, budget_tokens: int = 1500,
                 trace: str | None = None) -> dict[str, Any]:
        t = ctx.resolve(trace)
        step, rank = step_questions.pick_step(ctx.store(), t, step, rank)
        return condense(critical_subgraph(ctx.store(), t.trace_id, step, rank, hops=hops), budget_tokens)

    def compare(step_a: int, step_b: int, rank: int | None = None, trace: str | None = None) -> dict[str, Any]:
        return step_questions.compare_steps(ctx.store(), ctx.resolve(trace), step_a, step_b, rank)

    def ranks(rank_b: int, rank_a: int | None = None, step: int | None = None,
              trace: str | None = None) -> dict[str, Any]:
        return step_questions.compare_ranks(ctx.store(), ctx.resolve(trace), rank_b, rank_a, step)

    def runs(base: str, other: str) -> dict[str, Any]:
        # the comparison of `oracle diff` (workspace/diff.py); the names resolve as the other tools' do
        ids = ctx.resolve(base).trace_id, ctx.resolve(other).trace_id
        return diff_traces(*ids, ctx.settings).brief()

    def late(step: int | None = None, trace: str | None = None) -> dict[str, Any]:
        return step_questions.stragglers(ctx.store(), ctx.resolve(trace), step)

    def similar(query: str, k: int = 5) -> dict[str, Any]:
        rows = similar_findings(ctx.store(), query, k=k)
        return {"findings": [dict(r) | {"similarity": round(float(r["similarity"]), 3)} for r in rows]}

    def whatif(edit: str, step: int | None = None, trace: str | None = None) -> dict[str, Any]:
        t = ctx.resolve(trace)
        # the graph model (torch, seconds to load) only for an edit whose model prediction can be the one chosen
        return _whatif_summary(whatif_trace(t.trace_id, [edit], ctx.settings, step=step,
                                            model=model_is_scored([edit])))

    def optimize(step: int | None = None, budget: int = 3, trace: str | None = None) -> dict[str, Any]:
        # ranked by the replay alone: the graph model costs most of a second per candidate on a large step, and
        # for fixes (most candidates) its recorded error is no lower; `whatif` gives the model's view of one
        t = ctx.resolve(trace)
        plan = optimize_trace(t.trace_id, ctx.settings, step=step, budget=budget, model=False).to_json()
        plan["candidates"] = plan["candidates"][:6]
        return {"trace": t.name} | plan  # the trace's name for the answer's check command

    def playbook(query: str, k: int = 3, category: str | None = None) -> dict[str, Any]:
        if category is None:
            return {"entries": playbook_search(ctx.store(), query, k=k)}
        entries = [e for e in playbook_search(ctx.store(), query, k=50) if e["category"] == category]
        return {"entries": entries[:k], "category": category}

    def cypher(query: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        bound = dict(params or {})
        if "$trace" in query:
            bound.setdefault("trace", ctx.resolve(None).trace_id)
        rows = run_read_only(ctx.store(), query, params=bound)
        return {"rows": rows, "count": len(rows)}

    def bound(trace: str | None = None) -> dict[str, Any]:
        return next_questions.job_bound(ctx.store(), ctx.resolve(trace), ctx.settings)

    def ops(step: int | None = None, trace: str | None = None) -> dict[str, Any]:
        return next_questions.top_ops(ctx.store(), ctx.resolve(trace), step, settings=ctx.settings)

    def like_peers(rank: int, step: int | None = None, trace: str | None = None) -> dict[str, Any]:
        return next_questions.rank_like_peers(ctx.store(), ctx.resolve(trace), ctx.settings, step, rank)

    def run_whatif(edit: str, trace: str | None = None) -> dict[str, Any]:
        return next_questions.whatif_run(ctx.resolve(trace), edit, ctx.settings)

    def hang(dumps: str | None = None, traces: str | None = None) -> dict[str, Any]:
        folder = dumps or ctx.dumps
        if folder is None:
            raise ConfigError("no Flight Recorder dumps given: pass their folder (oracle ask --dumps DIR)")
        return hang_report(Path(folder), ctx.settings, traces=traces)

    def pipeline_job(pipeline: str | None = None, whatif: list[str] | None = None) -> dict[str, Any]:
        path = pipeline or ctx.pipeline
        if path is None:
            raise ConfigError("no pipeline job given: pass --pipeline PATH (its op table, .parquet or .csv, with "
                              "its meta.yaml)")
        return _pipeline_brief(straggler_report(Path(path), ctx.settings, edits=whatif or ()), path)

    specs: list[tuple[str, Callable[..., Any], type[BaseModel], str]] = [
        ("list_traces", traces_, _NoArgs, "The traces loaded in the graph database: id, name, ranks, steps."),
        ("list_steps", steps_, _TraceArg, "Every step of a trace with its wall time and GPU busy/idle, the median "
                                         "step, the slow (step, rank)s with their excess over the rank's median, "
                                         "and the GPU-bound ones."),
        ("explain_step", explain, _StepArgs, "Why a step is slow: its wall time and attribution against the rank's "
                                             "median step, what its GPU did (busy, idle, computation, "
                                             "communication; null without GPU events) and whether it is GPU-bound, "
                                             "the ops carrying its critical path, and its findings (cause first)."),
        ("critical_subgraph", subgraph, _SubgraphArgs, "The critical path of a (step, rank) plus k hops of typed "
                                                       "edges, condensed: top op classes, categories against the "
                                                       "median step, collectives and who arrived last."),
        ("compare_steps", compare, _CompareStepsArgs, "Two steps of one rank compared: wall time, categories, and "
                                                      "the op classes whose time changed most."),
        ("compare_ranks", ranks, _CompareRanksArgs, "Two ranks in one step compared: wall time, categories of "
                                                    "their critical paths, what each GPU did, each rank's "
                                                    "findings, and the step's cause (the rank that delayed it)."),
        ("compare_runs", runs, _CompareRunsArgs, "Two traces (runs) compared as `oracle diff` compares them: the "
                                                 "verdict per steady step with a bootstrap confidence, how "
                                                 "comparable the runs are, the cause, the top movers (categories, "
                                                 "ops, findings, collectives, ranks) and the edit that takes the "
                                                 "slower run to the faster one."),
        ("stragglers", late, _StepOnly, "Per collective of a step: the rank that arrived last and by how many ms."),
        ("similar_findings", similar, _SearchArgs, "Findings of every loaded trace nearest to a description: have "
                                                   "we seen this before, and what fixed it."),
        ("whatif", whatif, _WhatIfArgs, "Predicts a step's time under an edit with the replay and the graph model, "
                                        "and says which predictor to trust for that edit and why."),
        ("optimize", optimize, _OptimizeArgs, "Ranked changes for a step with gains predicted by the replay (on a "
                                              "GPU-bound step, kernel-side ones), and a plan of the best few applied "
                                              "one after another (ask whatif for the graph model's view of one "
                                              "change)."),
        ("playbook_search", playbook, _PlaybookArgs, "Optimization playbook entries nearest to a description, "
                                                     "optionally only those of one bottleneck category."),
        ("job_bound", bound, _TraceArg, "The run's verdict over its steady steps (input-, communication-, host-, "
                                        "launch- or GPU-bound: the cause whose fix saves most, with the saving and "
                                        "its interval, the GPU's busy share beside it), each group's share of the "
                                        "wall time, what the GPU did, and the slowest step against the slow-step "
                                        "rule (whether any step ran abnormally long)."),
        ("top_ops", ops, _StepOnly, "The ops carrying most critical-path time in a step, or summed over the run "
                                    "when no step is given, and the GPU kernels taking most GPU time (full "
                                    "name and readable short_name)."),
        ("rank_like_peers", like_peers, _RankArgs, "What a step would take if one rank behaved like the others: "
                                                   "that rank's findings in the step fixed, predicted together."),
        ("whatif_run", run_whatif, _RunWhatIfArgs, "What an edit saves over every complete step of the run, "
                                                   "summed (whatif predicts one step)."),
        ("hang_report", hang, _HangArgs, "Why a distributed job hangs, from its Flight Recorder dumps: the "
                                         "collective it is stuck in, the ranks waiting in it, the culprit ranks "
                                         "and why (never entered, a mismatched call, no dump), the first "
                                         "divergence, each rank's line of code, and what to look at next."),
        ("straggler_report", pipeline_job, _StragglerArgs,
         "Who holds a pipeline-parallel job back, from its op table: the cause (slow_worker, stage_imbalance, "
         "uneven_microbatches, unexplained, none) with a headline, the slowdown S against the ideal step, the "
         "attribution by DP rank, stage, op type and worker, the shares of the gap (M_W one worker, M_S the last "
         "stage), the fixes with predicted step times and intervals, and each what-if asked."),
        ("cypher", cypher, _CypherArgs, "One read-only Cypher query over the graph (labels Trace, Rank, Step, Op, "
                                        "Collective, Finding, Playbook); writes are refused; rows are limited."),
    ]
    return [StructuredTool.from_function(func=_guarded(ctx, name, fn), name=name, description=doc, args_schema=schema)
            for name, fn, schema, doc in specs]


TOOL_NAMES = ("list_traces", "list_steps", "explain_step", "critical_subgraph", "compare_steps", "compare_ranks",
              "compare_runs",
              "stragglers", "similar_findings", "whatif", "optimize", "playbook_search", "job_bound", "top_ops",
              "rank_like_peers", "whatif_run", "hang_report", "straggler_report", "cypher")

