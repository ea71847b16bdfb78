"""Pipeline-parallel jobs recorded as op tables: their dependency model and its point graph.

Imports ``traces/`` and ``graph/`` below it; replayed by the same longest-path pass as every graph.
"""

from bottleneck_oracle.graph.pipeline.job_graph import JobGraph, build_job_graph
from bottleneck_oracle.graph.pipeline.schedule import PipelineSchedule, build_schedule

__all__ = ["JobGraph", "PipelineSchedule", "build_job_graph", "build_schedule"]
