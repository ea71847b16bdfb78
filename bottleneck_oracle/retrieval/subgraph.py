"""Critical-subgraph retrieval: what the graph database holds about one (step, rank), read with the
query library's queries into one record that ``retrieval.context.condense`` turns into an LLM's context.
"""

from __future__ import annotations

from dataclasses import dataclass

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb import GraphStore
from bottleneck_oracle.graphdb.queries import subgraph_query
from bottleneck_oracle.graphdb.types import Row

__all__ = ["Subgraph", "critical_subgraph"]


@dataclass(frozen=True, slots=True)
class Subgraph:
    """The rows the graph database holds about one (step, rank) of a trace.

    Args:
        trace_id (str): the trace.
        step (int): the step.
        rank (int): the rank whose critical path it is.
        hops (int): the neighbourhood radius of ``nodes`` around the path.
        nodes (tuple[Row, ...]): ``critical_subgraph`` rows: the ops on the path (hops 0) and within ``hops``.
        edges (tuple[Row, ...]): ``subgraph_edges`` rows: the typed DAG edges among ``nodes``.
        top_ops (tuple[Row, ...]): ``top_critical_ops`` rows: the path's largest contributors (µs).
        collectives (tuple[Row, ...]): ``collective_stragglers`` rows of the step: who arrived last, how late (µs).
        steps (tuple[Row, ...]): ``trace_steps`` rows of every (step, rank) of the trace (ms).
        findings (tuple[Row, ...]): ``step_findings`` rows: the findings that explain the step.
    """

    trace_id: str
    step: int
    rank: int
    hops: int
    nodes: tuple[Row, ...]
    edges: tuple[Row, ...]
    top_ops: tuple[Row, ...]
    collectives: tuple[Row, ...]
    steps: tuple[Row, ...]
    findings: tuple[Row, ...]

    @property
    def step_row(self) -> Row:
        """The ``trace_steps`` row of this (step, rank).

        Raises:
            KeyError: ``steps`` lacks it (a Subgraph not made by ``critical_subgraph``).
        """
        for r in self.steps:
            if r["step"] == self.step and r["rank"] == self.rank:
                return r
        raise KeyError(f"trace {self.trace_id}: no row for step {self.step} on rank {self.rank}")


def _check_step(trace_id: str, steps: list[Row], step: int, rank: int) -> None:
    if not steps:
        raise ConfigError(f"trace {trace_id}: not in the graph database (or its load is not complete): ingest it")
    if any(r["step"] == step and r["rank"] == rank for r in steps):
        return
    known = sorted({int(r["step"]) for r in steps})
    ranks = sorted({int(r["rank"]) for r in steps if r["step"] == step})
    if ranks:
        raise ConfigError(f"trace {trace_id}: step {step} has no rank {rank}; its ranks are "
                          f"{', '.join(map(str, ranks))}")
    raise ConfigError(f"trace {trace_id}: no step {step}; its steps are {', '.join(map(str, known))}")


def critical_subgraph(store: GraphStore, trace_id: str, step: int, rank: int, hops: int = 1, *,
                      top_k: int = 30) -> Subgraph:
    """Reads the critical subgraph of ``step`` on ``rank``: the ops on its critical path and within
    ``hops`` DAG edges of them, the edges among them, the path's ``top_k`` contributors, the step's
    collectives, every step of the trace (for medians) and the step's findings.

    Args:
        store (GraphStore): the database holding the trace (loaded at detail ``full`` or ``critical``;
            a ``summary`` load has no ops, so nodes, edges and top ops are empty).
        trace_id (str): the trace's id.
        step (int): the step (-1: a trace without ProfilerStep marks).
        rank (int): the rank whose critical path it is.
        hops (int): neighbourhood radius, 0 to ``graphdb.queries.MAX_HOPS``.
        top_k (int): how many of the path's contributors to read.

    Raises:
        ConfigError: the trace is not loaded, or has no such step or rank (the message names those it has).
        QueryError: ``hops`` out of range, or the server rejected a query.
    """
    query = subgraph_query(hops)
    steps = store.read("trace_steps", {"trace": trace_id})
    _check_step(trace_id, steps, step, rank)
    where = {"trace": trace_id, "step": int(step), "rank": int(rank)}
    nodes = store.read(query, where)
    edges = store.read("subgraph_edges", {"trace": trace_id, "keys": [n["key"] for n in nodes]}) if nodes else []
    return Subgraph(
        trace_id=trace_id, step=int(step), rank=int(rank), hops=int(hops), nodes=tuple(nodes), edges=tuple(edges),
        top_ops=tuple(store.read("top_critical_ops", {**where, "k": int(top_k)})),
        collectives=tuple(store.read("collective_stragglers", {"trace": trace_id, "step": int(step)})),
        steps=tuple(steps), findings=tuple(store.read("step_findings", {"trace": trace_id, "step": int(step)})),
    )
