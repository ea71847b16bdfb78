"""What a job's other ranks say about the collectives of one rank, for the graph of that rank alone.

The graph of one rank of a job (``build_graph(trace, job=...)``) has every node and edge the job's graph has
on that rank, once it knows four things only the other ranks can tell: which instance each of its comm
nodes belongs to; when each instance's first member ended and its last one arrived; which rank arrived
last; and, for a gloo receive whose send is on another rank, when that send ended (the thread waiting for
the receive resumed after it). ``job/summary.py`` gathers them over every rank's keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bottleneck_oracle.graph.collectives import CollectiveMatch
from bottleneck_oracle.graph.graph import CollectiveTable

__all__ = ["JobCollectives", "RemoteSends"]

_NO = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class RemoteSends:
    """gloo sends on other ranks to this rank's receives: the receiving thread resumed when each ended.

    Args:
        receive (np.ndarray): int64[S] the receive, a node of this rank's graph.
        instance (np.ndarray): int64[S] the job-wide instance of the pair.
        rank (np.ndarray): int64[S] the sender's rank; ``node``: the send, a node of that rank's graph.
        end_ns (np.ndarray): int64[S] the send's end, on this rank's clock (as the sender's graph has it, once
            known: ``JobCollectives.settled``).
    """

    receive: np.ndarray = field(default_factory=lambda: _NO)
    instance: np.ndarray = field(default_factory=lambda: _NO)
    rank: np.ndarray = field(default_factory=lambda: _NO)
    node: np.ndarray = field(default_factory=lambda: _NO)
    end_ns: np.ndarray = field(default_factory=lambda: _NO)


@dataclass(frozen=True, slots=True)
class JobCollectives:
    """The collectives of one rank as the job's other ranks matched them.

    Args:
        nodes (np.ndarray): int64[M] the rank's members, as node ids of its own graph.
        instance (np.ndarray): int64[M] the job-wide instance of each.
        table (CollectiveTable): one row per distinct instance of ``instance``, in increasing order.
        first_end (np.ndarray): int64[M] the end of the instance's first member to finish, on this rank's clock.
        last_start (np.ndarray): int64[M] the start of its last member to arrive, on this rank's clock.
        last_rank, last_node (np.ndarray): int64[M] that member's rank and node (the lowest, of several
            arrived at once: the job's graph's binding edge).
        settled_end (np.ndarray | None): int64[M] ``first_end`` once the other ranks' graphs ended their gloo
            ops where their threads resumed, as the job's graph has it (None: not known, ``first_end``).
        sends (RemoteSends): the sends on other ranks to this rank's receives.
        sent (np.ndarray): int64 this rank's gloo sends to receives on other ranks (nodes of its graph).
    """

    nodes: np.ndarray
    instance: np.ndarray
    table: CollectiveTable
    first_end: np.ndarray
    last_start: np.ndarray
    last_rank: np.ndarray
    last_node: np.ndarray
    settled_end: np.ndarray | None = None
    sends: RemoteSends = field(default_factory=RemoteSends)
    sent: np.ndarray = field(default_factory=lambda: _NO)

    def match(self, end: np.ndarray) -> tuple[CollectiveMatch, np.ndarray, np.ndarray]:
        """The rank's match (instances numbered in ``table``'s rows, no edges: their other ends are on other
        ranks), and each node's completion and last arrival as ``completion_ns`` and ``last_arrival_ns``
        give them (``end``: every node's end)."""
        instance = np.full(len(end), -1, dtype=np.int32)
        instance[self.nodes] = self.rows(self.instance)
        reliable = self.table.reliable[instance[self.nodes]]
        done, arrived = end.copy(), np.full(len(end), np.iinfo(np.int64).max, dtype=np.int64)
        done[self.nodes[reliable]] = self.first_end[reliable]
        arrived[self.nodes[reliable]] = self.last_start[reliable]
        return CollectiveMatch(instance, self.table, np.zeros(0, np.int64), np.zeros(0, np.int64)), done, arrived

    def rows(self, instance: np.ndarray) -> np.ndarray:
        """The rows of ``table`` (the rank's graph's collective ids) of job-wide instances."""
        return np.searchsorted(np.unique(self.instance), instance)

    def per_row(self, values: np.ndarray) -> np.ndarray:
        """Per row of ``table``, a value given per member (the same for every member of an instance)."""
        _, first = np.unique(self.instance, return_index=True)
        return values[first]
