"""The graph schema as data: labels, relationship types, keys, indexes and the vector index.

Both backends build their schema statements from these tables (``queries.schema_statements``),
so one description holds for FalkorDB and Neo4j. README's "Graph database" section draws it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bottleneck_oracle.graph.types import EdgeType

__all__ = [
    "Label", "Rel", "Key", "VectorIndex", "DAG_RELS", "KEYS", "INDEXES", "REL_INDEXES", "VECTOR_INDEXES",
    "TRACE_SCOPED", "SCHEMA_VERSION", "EMBEDDING_DIM",
]

SCHEMA_VERSION = 5  # bump when a property or relationship changes meaning: old loads are reloaded
# (2: Step nodes carry the GPU timeline and GPU-bound verdict, gpu_*; 3: Finding nodes mark their step's
# cause, with the ranks that waited for it, cause, waiting, waited_ms; 4: a load's cursors are per part, LoadPart)
EMBEDDING_DIM = 384  # all-MiniLM-L6-v2


class Label(StrEnum):
    """Node labels."""

    TRACE = "Trace"  # one loaded job: id = content hash of its files, status set last
    RANK = "Rank"  # one rank's file
    STEP = "Step"  # one (step, rank): wall time, attribution, slow flag
    OP = "Op"  # one ExecGraph node: CPU op, annotation, runtime call, kernel, copy, comm op
    COLLECTIVE = "Collective"  # one collective instance matched across ranks
    FINDING = "Finding"  # one bottleneck finding (DESIGN vocabulary)
    PREDICTION = "Prediction"  # a model's prediction for one (step, rank)
    PLAYBOOK = "Playbook"  # one optimization entry of the curated playbook
    LOAD_PART = "LoadPart"  # one part of a load under way (head, a rank, tail) and its last committed batch


class Rel(StrEnum):
    """Relationship types: the DAG's typed edges, then the structure around them."""

    NEST = "NEST"
    THREAD_NEXT = "THREAD_NEXT"
    LAUNCH = "LAUNCH"
    STREAM_NEXT = "STREAM_NEXT"
    SYNC = "SYNC"
    COLLECTIVE = "COLLECTIVE"
    DATALOAD = "DATALOAD"
    FWDBWD = "FWDBWD"
    DATA = "DATA"
    CRITICAL_NEXT = "CRITICAL_NEXT"  # segment after segment along one (step, rank)'s critical path
    IN_STEP = "IN_STEP"  # Op → the Step holding it
    ON_RANK = "ON_RANK"  # Step → its Rank
    IN_TRACE = "IN_TRACE"  # Rank → its Trace
    MEMBER_OF = "MEMBER_OF"  # Op → the Collective instance it takes part in
    EXPLAINS = "EXPLAINS"  # Finding → each Step it explains
    PREDICTS = "PREDICTS"  # Prediction → its Step
    RATES = "RATES"  # Prediction → Op, with the predicted criticality


DAG_RELS: dict[EdgeType, Rel] = {e: Rel[e.name] for e in EdgeType}


@dataclass(frozen=True, slots=True)
class Key:
    """A property every query matches a label on: unique keys get a constraint, others an index."""

    label: Label
    prop: str


@dataclass(frozen=True, slots=True)
class VectorIndex:
    """A vector index over a list-of-floats property (cosine similarity)."""

    label: Label
    prop: str
    dim: int
    name: str  # the index name Neo4j queries by


KEYS: tuple[Key, ...] = (
    Key(Label.TRACE, "id"), Key(Label.RANK, "key"), Key(Label.STEP, "key"), Key(Label.OP, "key"),
    Key(Label.COLLECTIVE, "key"), Key(Label.FINDING, "key"), Key(Label.PREDICTION, "key"),
    Key(Label.PLAYBOOK, "key"), Key(Label.LOAD_PART, "key"),
)
# labels whose nodes belong to one trace (property ``trace``): indexed, and deleted with the trace, LoadPart
# first: a load that finds its head part knows the delete before it finished (graphdb/loader.py)
TRACE_SCOPED: tuple[Label, ...] = (
    Label.LOAD_PART, Label.OP, Label.STEP, Label.RANK, Label.COLLECTIVE, Label.FINDING, Label.PREDICTION,
)
INDEXES: tuple[Key, ...] = tuple(Key(label, "trace") for label in TRACE_SCOPED) + (
    Key(Label.STEP, "step"), Key(Label.COLLECTIVE, "step"), Key(Label.PLAYBOOK, "category"),
)
REL_INDEXES: tuple[tuple[Rel, str], ...] = ((Rel.CRITICAL_NEXT, "path"),)
VECTOR_INDEXES: tuple[VectorIndex, ...] = (
    VectorIndex(Label.PLAYBOOK, "embedding", EMBEDDING_DIM, "playbook_embedding"),
    VectorIndex(Label.FINDING, "embedding", EMBEDDING_DIM, "finding_embedding"),  # finding memory, every trace
)
