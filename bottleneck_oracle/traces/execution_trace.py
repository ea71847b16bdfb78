"""PyTorch execution traces (ExecutionTraceObserver JSON): the node table and data dependencies.

An execution trace (ET, the input of MLCommons Chakra) lists every operator of
one iteration with the tensors it read and wrote; a node's ``rf_id`` is its
RecordFunction id. This module keeps the nodes as columns and derives
read-after-write dependencies between operators.

Dependency rule (``data_dependencies``):

- Operators are ET nodes with ``rf_id > 0`` that are not the
  ``[pytorch|profiler|execution_...]`` process/thread roots. Nodes are taken in
  node-id order, which is the order operators started in.
- A tensor is a ``[tensor_id, storage_id, offset, numel, itemsize, device]``
  entry whose ``*_types`` entry starts with ``Tensor`` (or an element of a
  ``GenericList[...]``); data is identified by its storage (the tensor id when
  the storage id is 0). Undefined tensors (``Tensor(nullptr ...)``) carry no data
  and are skipped. Offsets are ignored: a write to part of a storage counts as a
  write to all of it.
- Every operator is lifted to its outermost operator: the highest ancestor on its
  thread that is an operator with tensor inputs or outputs. Annotations without
  tensors (``## forward ##``, ``autograd::engine::evaluate_function: ...``,
  ``Optimizer.step#...``) are not lifted to, so edges join ops such as
  ``aten::linear`` or ``AddmmBackward0`` rather than training phases.
- Writes: an output writes its storage when it is a fresh result (its storage is
  none of the operator's input storages) or an in-place/``out=`` result (its
  tensor id is one of the inputs', as ``add_``, ``fill_``, ``copy_`` return
  ``self``). A view or alias (a new tensor id on an input's storage: ``view``,
  ``t``, ``slice``, ``detach``) writes nothing, so readers of a view depend on the
  op that last wrote the data, not on the view op.
- Reads: for each input storage of an operator (or of any op nested in it) the
  edge is ``(outermost op of the last writer, outermost op of the reader)``.
  Writes and reads inside one outermost op make no edge, so no edge joins an op
  and its ancestor or descendant; an edge is kept only when the producer started
  before the consumer (smaller node id), so the result is acyclic. Only
  read-after-write edges are emitted, not write-after-read ones.
"""

from __future__ import annotations

import difflib
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces._decode import DecodedFile, EtNode
from bottleneck_oracle.traces._validate import summary
from bottleneck_oracle.traces.types import NONE

__all__ = ["ExecutionTrace", "align_with_kineto", "data_dependencies", "read_execution_trace", "thread_of_rf"]

log = logging.getLogger(__name__)

_ROOT_PREFIX = "[pytorch|profiler|execution_"
_LIST_PREFIX = "GenericList["
_TensorRef = tuple[int, int]  # (tensor id, storage key)


def _is_operator(node: EtNode) -> bool:
    return node.rf_id > 0 and not node.name.startswith(_ROOT_PREFIX)


def _element_types(list_type: str) -> list[str]:
    """Splits ``GenericList[A,B(x,y)]`` into ``["A", "B(x,y)"]`` at top-level commas."""
    inner = list_type[len(_LIST_PREFIX) : -1]
    parts: list[str] = []
    depth = start = 0
    for i, ch in enumerate(inner):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return parts


def _add_refs(value: object, type_name: str, into: list[_TensorRef]) -> None:
    """Appends the tensors in one input or output value to ``into``."""
    if type_name.startswith(_LIST_PREFIX) and isinstance(value, list):
        types = _element_types(type_name)
        if len(types) != len(value) and len(set(types)) == 1:
            types = types * len(value)
        for item, item_type in zip(value, types):
            _add_refs(item, item_type, into)
    elif type_name.startswith("Tensor") and "nullptr" not in type_name:
        if isinstance(value, list) and len(value) >= 2:
            tensor_id, storage_id = value[0], value[1]
            if isinstance(tensor_id, int) and isinstance(storage_id, int):
                key = storage_id if storage_id > 0 else -tensor_id - 1
                into.append((tensor_id, key))


def _refs(values: list[object], types: list[str]) -> list[_TensorRef]:
    refs: list[_TensorRef] = []
    for value, type_name in zip(values, types):
        _add_refs(value, type_name, refs)
    return refs


def _record_writes(
    inputs: list[_TensorRef], outputs: list[_TensorRef], op: int, writer: dict[int, int]
) -> None:
    """Marks ``op`` as the last writer of every output storage that is not a view."""
    in_tensors = {tensor for tensor, _ in inputs}
    in_storages = {key for _, key in inputs}
    for tensor, key in outputs:
        if tensor in in_tensors or key not in in_storages:
            writer[key] = op


def _dependency_node_pairs(nodes: list[EtNode]) -> set[tuple[int, int]]:
    """Returns ``(producer, consumer)`` outermost-op node ids; ``nodes`` in id order."""
    outer: dict[int, int] = {}  # operator node id -> its outermost op's node id
    writer: dict[int, int] = {}  # storage key -> outermost op that last wrote it
    pairs: set[tuple[int, int]] = set()
    for node in nodes:
        if not _is_operator(node):
            continue
        inputs = _refs(node.inputs, node.input_types)
        outputs = _refs(node.outputs, node.output_types)
        op = outer.get(node.parent, NONE) if node.parent != node.id else NONE
        if op == NONE:
            if not inputs and not outputs:
                continue
            op = node.id
        outer[node.id] = op
        for _, key in inputs:
            producer = writer.get(key, NONE)
            if producer != NONE and producer < op:
                pairs.add((producer, op))
        _record_writes(inputs, outputs, op, writer)
    return pairs


@dataclass(frozen=True, slots=True)
class ExecutionTrace:
    """The nodes of one execution trace as columns, one row per node in node-id order.

    Args:
        path: the file the trace was read from.
        pid: the OS process id the trace records (``pid``), ``None`` if absent.
        node_id: ET node id, increasing (the order nodes started in).
        parent: node id of the parent node (the process root is its own parent).
        rf_id: RecordFunction id; 0 for the process and thread roots.
        tid: ET thread number (small integers, not OS thread ids).
        name: index into ``names``.
        names: the interned node names.

    Shapes:
        ``node_id``, ``parent``, ``rf_id``, ``tid``: int64[N]; ``name``: int32[N].
    """

    path: Path
    pid: int | None
    node_id: np.ndarray
    parent: np.ndarray
    rf_id: np.ndarray
    tid: np.ndarray
    name: np.ndarray
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        columns = (self.node_id, self.parent, self.rf_id, self.tid, self.name)
        if len({len(column) for column in columns}) != 1:
            raise ValueError(f"{self.path.name}: ExecutionTrace columns differ in length")


_INT64 = (-(2**63), 2**63 - 1)


def _check_nodes(nodes: list[EtNode], path: Path, skipped: Counter[str]) -> list[EtNode]:
    """The usable nodes (in id order): a node with an id beyond int64 or a repeated id is left
    out and counted; a node whose parent is not in the trace becomes a root; late parents are repaired.

    torch 2.13 records ops of other threads (``gloo:all_reduce`` on a gloo worker) under the main
    thread and, racing with it, sometimes gives them a parent that started after them (a larger
    id): such a node moves up to that parent's nearest ancestor that started before it.
    """
    kept: list[EtNode] = []
    parent_of: dict[int, int] = {}
    for node in nodes:
        bad = next((f for f in ("id", "parent", "rf_id", "tid") if not _INT64[0] <= getattr(node, f) <= _INT64[1]),
                   None)
        if bad or node.id in parent_of:
            skipped[f"node: bad {bad}" if bad else "node: duplicate id"] += 1
            continue
        kept.append(node)
        parent_of[node.id] = node.parent
    roots = [n for n, p in parent_of.items() if n == p]
    orphans = [node for node in kept if node.parent not in parent_of]
    for node in orphans:
        node.parent = parent_of[node.id] = node.id
    moved = 0
    for node in kept:
        if node.parent == node.id:
            continue
        parent, seen = node.parent, set()
        # parents not yet repaired can form a cycle: stop at the first repeat
        while parent > node.id and parent_of[parent] != parent and parent not in seen:
            seen.add(parent)
            parent = parent_of[parent]
        if parent > node.id:
            parent = min(roots, default=parent)
        if parent != node.parent:
            node.parent = parent_of[node.id] = parent
            moved += 1
    if moved or orphans:
        log.info("%s: %d execution-trace nodes moved under an earlier ancestor, %d without a parent made roots",
                 path.name, moved, len(orphans))
    return kept


def read_execution_trace(doc: DecodedFile, path: Path, skipped: Counter[str] | None = None) -> ExecutionTrace:
    """Builds the node table of a decoded execution trace.

    Args:
        doc: the decoded file (``decode_file``); its ``nodes`` become the usable ones, in id
            order, for ``data_dependencies``.
        path: the file it came from, named in error messages.
        skipped: counts the nodes left out, by reason (``node: duplicate id``).

    Returns:
        The nodes as columns, sorted by node id.

    Raises:
        TraceFormatError: ``nodes`` is missing, or no usable node remains.
    """
    skipped = Counter() if skipped is None else skipped
    if not doc.nodes:
        what = f"; {sum(skipped.values())} skipped ({summary(skipped.items())})" if skipped else " (missing or empty)"
        raise TraceFormatError(f"{path.name}: no usable execution-trace 'nodes'{what}")
    nodes = _check_nodes(sorted(doc.nodes, key=lambda node: node.id), path, skipped)
    if not nodes:
        raise TraceFormatError(f"{path.name}: no usable execution-trace 'nodes'; {sum(skipped.values())} "
                               f"skipped ({summary(skipped.items())})")
    doc.nodes = nodes  # type: ignore[assignment]
    index: dict[str, int] = {}
    name_ids = (index.setdefault(node.name, len(index)) for node in nodes)
    count = len(nodes)
    return ExecutionTrace(
        path=path,
        pid=doc.pid,
        node_id=np.fromiter((node.id for node in nodes), np.int64, count),
        parent=np.fromiter((node.parent for node in nodes), np.int64, count),
        rf_id=np.fromiter((node.rf_id for node in nodes), np.int64, count),
        tid=np.fromiter((node.tid for node in nodes), np.int64, count),
        name=np.fromiter(name_ids, np.int32, count),
        names=tuple(index),
    )


def data_dependencies(doc: DecodedFile) -> np.ndarray:
    """Finds which operator's output each operator reads (see the module docstring).

    Args:
        doc: a decoded execution trace; no ``nodes`` gives no dependencies.

    Returns:
        Unique ``(producer_rf_id, consumer_rf_id)`` rows between outermost
        operators, sorted; every producer started before its consumer.

    Shapes:
        int64[K, 2].
    """
    nodes = sorted(doc.nodes or (), key=lambda node: node.id)
    rf_of = {node.id: node.rf_id for node in nodes}
    pairs = sorted((rf_of[p], rf_of[c]) for p, c in _dependency_node_pairs(nodes))
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def thread_of_rf(trace: ExecutionTrace, rf_ids: np.ndarray) -> np.ndarray:
    """Looks up the ET thread of operators by ``rf_id``.

    ``thread_of_rf(trace, deps[:, 0]) != thread_of_rf(trace, deps[:, 1])`` marks
    the dependencies that cross threads (for example forward to backward).

    Args:
        trace: the node table.
        rf_ids: RecordFunction ids to look up.

    Returns:
        The ``tid`` of each id, ``NONE`` (-1) where no operator has it (ids <= 0
        included, as the roots share rf_id 0).

    Shapes:
        ``rf_ids``: int64[M] -> int64[M].
    """
    rf_ids = np.asarray(rf_ids, dtype=np.int64)
    if len(trace.rf_id) == 0:
        return np.full(rf_ids.shape, NONE, dtype=np.int64)
    order = np.argsort(trace.rf_id, kind="stable")
    sorted_rf = trace.rf_id[order]
    pos = np.minimum(np.searchsorted(sorted_rf, rf_ids), len(sorted_rf) - 1)
    found = (sorted_rf[pos] == rf_ids) & (rf_ids > 0)
    return np.where(found, trace.tid[order][pos], NONE).astype(np.int64)


def _thread_sequences(keys: np.ndarray, order_by: np.ndarray, names: list[str]) -> dict[int, tuple[np.ndarray, list[str]]]:
    out: dict[int, tuple[np.ndarray, list[str]]] = {}
    for k in np.unique(keys).tolist():
        idx = np.flatnonzero(keys == k)
        idx = idx[np.argsort(order_by[idx], kind="stable")]
        out[k] = (idx, [names[i] for i in idx.tolist()])
    return out


def align_with_kineto(
    trace: ExecutionTrace, op_names: list[str], op_lane: np.ndarray, op_external_id: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ET operators with the Kineto ops of the same rank.

    ``rf_id`` is not the Kineto ``External id`` in general: Kineto numbers ops
    per thread buffer, the ET in global start order. Both orders agree within a
    thread, so each ET thread is aligned by op name (difflib matching blocks)
    with the Kineto thread it matches best, ops taken in ``rf_id`` and
    ``External id`` order.

    Args:
        op_names: names of the rank's Kineto ``cpu_op``/``user_annotation`` events.
        op_lane: int[K] thread of each; op_external_id: int[K] their External ids.

    Returns:
        ``(rf_ids, kineto_positions)``: matched pairs; positions index ``op_names``.
    """
    is_op = trace.rf_id > 0
    et_names = [trace.names[i] for i in trace.name.tolist()]
    et_threads = _thread_sequences(trace.tid[is_op], trace.rf_id[is_op], [n for n, o in zip(et_names, is_op) if o])
    rf_of = trace.rf_id[is_op]
    k_threads = _thread_sequences(op_lane, op_external_id, op_names)
    rf_out, pos_out = [], []
    free = set(k_threads)
    for _, (idx, names) in sorted(et_threads.items(), key=lambda kv: -len(kv[1][1])):
        best, best_blocks = None, []
        exact = [lane for lane in free if k_threads[lane][1] == names]  # recorded together: same ops
        for lane in exact[:1] or free:
            if lane in exact:
                blocks = [difflib.Match(0, 0, len(names))]
            else:
                blocks = difflib.SequenceMatcher(None, names, k_threads[lane][1], autojunk=False).get_matching_blocks()
            if best is None or sum(b.size for b in blocks) > sum(b.size for b in best_blocks):
                best, best_blocks = lane, blocks
        if best is None:
            continue
        free.discard(best)
        k_idx = k_threads[best][0]
        for b in best_blocks:
            rf_out.extend(rf_of[idx[b.a : b.a + b.size]].tolist())
            pos_out.extend(k_idx[b.b : b.b + b.size].tolist())
    return np.array(rf_out, dtype=np.int64), np.array(pos_out, dtype=np.int64)
