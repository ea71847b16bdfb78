"""The execution DAG: build it from a trace, find each step's critical path, explain it."""

from bottleneck_oracle.dag.build import build_graph
from bottleneck_oracle.dag.graph import CollectiveTable, ExecGraph, StepTable
from bottleneck_oracle.dag.types import Bottleneck, Category, EdgeType, NodeKind, Role

__all__ = [
    "Bottleneck",
    "Category",
    "CollectiveTable",
    "EdgeType",
    "ExecGraph",
    "NodeKind",
    "Role",
    "StepTable",
    "build_graph",
]
