"""The shapes of the HTTP API's bodies, for the OpenAPI schema and the validation of what comes in.

Responses are documented by these models and written by the routes as JSON directly (the service
layer's dicts hold numpy numbers); every response model allows fields beyond those it names, so a
service that adds a field does not break the schema.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bottleneck_oracle.workspace.timeline import DEFAULT_MAX_EVENTS

__all__ = [
    "AskIn", "DiffOut", "ErrorOut", "ExplainOut", "FindingsOut", "HealthOut", "OptimizeIn", "OptimizeOut", "StepsOut",
    "StragglersOut", "TimelineOut", "TraceOneOut", "TracesOut", "WhatIfIn", "WhatIfOut", "MAX_EVENTS_LIMIT",
]

MAX_EVENTS_LIMIT = 10 * DEFAULT_MAX_EVENTS


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorOut(BaseModel):
    detail: str = Field(description="One line naming the thing and what is wrong.")


class HealthOut(BaseModel):
    status: Literal["ok"]
    version: str


class TraceOut(_Open):
    id: str
    name: str
    ranks: int
    steps: int = Field(description="(step, rank) rows loaded")
    status: str = Field(description="complete, or loading while (or after a crash during) a load")


class TracesOut(BaseModel):
    traces: list[TraceOut]


class TraceOneOut(BaseModel):
    trace: TraceOut


class GpuOut(_Open):
    """What a rank's GPU did in a step's window (TraceLens's gpu_timeline), ms."""

    busy_ms: float
    idle_ms: float
    computation_ms: float
    comm_ms: float
    exposed_comm_ms: float = Field(description="communication no computation overlaps")
    memcpy_ms: float
    exposed_memcpy_ms: float
    busy_pct: float = Field(description="busy share of the step's window, %")


class StepOut(_Open):
    step: int
    rank: int
    wall_ms: float
    slow: bool
    partial: bool
    median_ms: float | None = Field(description="the median of the rank's other steps")
    excess_ms: float | None = Field(description="the excess over that median")
    gpu: GpuOut | None = Field(default=None, description="None: the rank recorded no GPU work")
    gpu_bound: bool = Field(default=False, description="the GPU was busy most of the step")


class StepsOut(_Open):
    trace: TraceOut
    steps: list[StepOut] = Field(description="one per (step, rank)")
    slow: list[int] = Field(description="slow steps, slowest first")
    run: dict[str, Any] = Field(description="the run's verdict over its steady steps (oracle analyze's Run: line)")


class ExplainOut(_Open):
    trace: str
    step: int
    rank: int
    wall_ms: float
    slow: bool
    breakdown_ms: dict[str, float]
    findings: list[dict[str, Any]]
    cause: dict[str, Any] | None = None


class LaneOut(BaseModel):
    id: int
    rank: int
    kind: Literal["thread", "stream"]
    label: str


class EventOut(BaseModel):
    id: int = Field(description="graph node id")
    lane: int = Field(description="a lanes[].id")
    name: str
    start_ms: float = Field(description="relative to t0_ms")
    dur_ms: float
    category: str
    slack_ms: float
    critical: bool
    depth: int


class GpuStripOut(_Open):
    """One rank's row of the utilization strip: its GPU record, its window and its busy intervals."""

    rank: int
    busy_ms: float
    idle_ms: float
    busy_pct: float
    start_ms: float = Field(description="the rank's step window, relative to t0_ms")
    end_ms: float
    busy: list[list[float]] = Field(description="[start_ms, end_ms] of the union of its GPU work, relative to t0_ms")


class TimelineOut(_Open):
    trace_id: str
    step: int
    t0_ms: float = Field(description="absolute start of the step's earliest rank")
    span_ms: float
    critical_rank: int | None = Field(description="the rank whose critical path is shown")
    lanes: list[LaneOut]
    events: list[EventOut]
    critical_path: list[int] = Field(description="node ids in path order")
    dropped: int = Field(description="events left out by max_events, the shortest non-critical first")
    gpu: list[GpuStripOut] = Field(default_factory=list, description="per rank with GPU work; empty: no GPU events")


class FindingOut(_Open):
    category: str
    step: int | None
    ranks: list[int]
    impact_ms: float
    severity: str
    summary: str
    evidence: str
    remedy: str | None


class FindingsOut(BaseModel):
    findings: list[FindingOut]


class WhatIfIn(BaseModel):
    edits: list[str] = Field(min_length=1, max_length=16, description="e.g. collective_faster:allreduce=2")
    step: int | None = Field(default=None, description="default: the slowest step")


class WhatIfOut(_Open):
    step: int
    baseline_ms: float
    predicted_ms: dict[str, float]
    chosen: str
    why: str
    critical_path: list[int] = Field(description="node ids of the step's critical path after the edits")
    old_critical_path: list[int] = Field(description="node ids of the recorded critical path")


class OptimizeIn(BaseModel):
    step: int | None = Field(default=None, description="default: the slowest step")
    budget: int = Field(default=3, ge=1, le=10)


class OptimizeOut(_Open):
    step: int
    baseline_ms: float
    candidates: list[dict[str, Any]]
    plan: list[dict[str, Any]]


class HangOut(_Open):
    """Why the job hangs, as ``oracle hang --json`` prints it."""

    verdict: Literal["hang", "none", "unknown"]
    cause: str
    culprit_ranks: list[int]
    waiting_ranks: list[int]
    collective: dict[str, Any] | None = Field(description="the stuck collective: seq, op, group, sizes")
    first_divergence: dict[str, Any] | None
    where: dict[str, str] = Field(description="rank → file:line of its call (first frame outside torch)")
    missing_dumps: list[int]
    explanation: list[str]
    next_steps: list[str]


class StragglersOut(_Open):
    """Who holds a pipeline job back, as ``oracle stragglers --json`` prints it (times in seconds)."""

    cause: Literal["slow_worker", "stage_imbalance", "uneven_microbatches", "unexplained", "none"]
    headline: str
    explanation: list[str]
    slowdown: float = Field(description="S: the mean step (launch gaps removed) over the ideal step")
    step_time_s: dict[str, float] = Field(description="recorded, no_launch_gaps, ideal, replayed")
    by_dp_rank: dict[str, float]
    by_stage: dict[str, float]
    by_op_type: dict[str, float]
    by_worker: dict[str, dict[str, Any]] = Field(description="rank → dp_rank, stage, slowdown; slowest first")
    worker_share: float = Field(description="M_W: the gap's share the slowest workers, healthy, close")
    stage_share: float = Field(description="M_S: the gap's share the last stage, balanced, closes")
    work_share: float
    worst_stage: int
    fixes: list[dict[str, Any]] = Field(description="action, cause, predicted_step_s, interval_s, saving_s, "
                                                    "saving_pct, source; the cause's first")
    whatif: list[dict[str, Any]] = Field(description="each edit asked: predicted_step_s, interval_s, saving_s")
    heatmap: dict[str, Any] = Field(description="values[dp_rank][stage]: each worker's slowdown")
    job: dict[str, Any]


class DiffOut(_Open):
    """NEW against BASE, as ``oracle diff --format json`` prints it."""

    verdict: Literal["faster", "slower", "unchanged"]
    headline: str
    delta_ms: float = Field(description="NEW - BASE, median steady step")
    delta_pct: float
    interval_pct: list[float] = Field(description="95% bootstrap interval of delta_pct")
    confidence: float | None = Field(description="probability of the verdict; None: no step spread to judge by")
    base: dict[str, Any] = Field(description="BASE's steps: steady, warmup, outliers, partial, median_ms, steady_ms")
    new: dict[str, Any]
    comparability: dict[str, Any] = Field(description="level (high, medium, low) and its reasons")
    moved: dict[str, list[dict[str, Any]]] = Field(description="categories, gpu, op_classes, ops, collectives, "
                                                               "findings, critical_path, ranks; largest first")
    whatif: dict[str, Any] | None = Field(description="the edit that takes the slower run to the faster one")
    cause: dict[str, Any] | None = Field(default=None, description="the attribution category that moved most in "
                                         "the verdict's direction and the finding behind it; None when unchanged")
    base_verdict: dict[str, Any] | None = Field(default=None, description="BASE's run verdict (oracle analyze's)")
    new_verdict: dict[str, Any] | None = Field(default=None, description="NEW's run verdict")
    base_trace: dict[str, Any]
    new_trace: dict[str, Any]


class AskIn(BaseModel):
    question: str = Field(min_length=1, max_length=2000)
    trace: str | None = Field(default=None, description="id or name; default: the newest loaded")
    llm: str = Field(default="offline", description="'offline' or 'openai:MODEL'")
    session: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$",
                                description="the client's conversation: a follow-up in the same session "
                                            "refers to the earlier answers")
