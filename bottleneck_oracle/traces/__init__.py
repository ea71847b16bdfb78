"""Trace readers: Kineto JSON and PyTorch execution traces → one columnar ``Trace``.

Imports only the shared base modules: every layer reads its tables.
"""

from bottleneck_oracle.traces.events import (
    UNREAD_CATEGORY,
    EventTable,
    FlowTable,
    LaneTable,
    ProcessGroup,
    RankInfo,
    Trace,
)
from bottleneck_oracle.traces.loader import check_ranks, one_rank, read_rank, read_trace, trace_files
from bottleneck_oracle.traces.types import EventKind, SyncKind

__all__ = [
    "EventKind",
    "EventTable",
    "FlowTable",
    "LaneTable",
    "ProcessGroup",
    "RankInfo",
    "SyncKind",
    "Trace",
    "UNREAD_CATEGORY",
    "check_ranks",
    "one_rank",
    "read_rank",
    "read_trace",
    "trace_files",
]
