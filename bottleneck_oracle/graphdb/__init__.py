"""The graph database: GraphStore backends (embedded FalkorDB, Neo4j), schema, loader, query library.

Imports the graph model and the analysis layers below it; never the what-if, the service layer or above.
"""

from bottleneck_oracle.graphdb.loader import LoadReport, delete_trace, list_traces, load_analysis, trace_id
from bottleneck_oracle.graphdb.server import ServerInfo, server_status, start_server, stop_server
from bottleneck_oracle.graphdb.store import GraphStore, open_store
from bottleneck_oracle.graphdb.types import Backend, Capability, Detail, TraceSummary

__all__ = [
    "Backend",
    "Capability",
    "Detail",
    "GraphStore",
    "LoadReport",
    "ServerInfo",
    "TraceSummary",
    "delete_trace",
    "list_traces",
    "load_analysis",
    "open_store",
    "server_status",
    "start_server",
    "stop_server",
    "trace_id",
]
