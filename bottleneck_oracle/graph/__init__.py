"""The execution graph: nodes and typed edges built from a trace, its point graph, critical paths and GPU timeline.

The only package that builds nodes and edges; the C loops (``_native.c``) are its core.
Imports ``traces/`` and the shared base modules, nothing above.
"""

from bottleneck_oracle.graph.build import build_graph
from bottleneck_oracle.graph.graph import CollectiveTable, ExecGraph, StepTable
from bottleneck_oracle.graph.names import readable_kernel_name
from bottleneck_oracle.graph.types import Bottleneck, Category, EdgeType, NodeKind, Role

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
    "readable_kernel_name",
]
