"""GraphRAG retrieval: critical-subgraph retrieval, context within a token budget, finding memory and
playbook vector search.
Imports ``graphdb/`` and below.
"""

from bottleneck_oracle.retrieval.context import DEFAULT_BUDGET_TOKENS, condense, estimate_tokens
from bottleneck_oracle.retrieval.memory import playbook_search, similar_findings
from bottleneck_oracle.retrieval.subgraph import Subgraph, critical_subgraph

__all__ = [
    "DEFAULT_BUDGET_TOKENS",
    "Subgraph",
    "condense",
    "critical_subgraph",
    "estimate_tokens",
    "playbook_search",
    "similar_findings",
]
