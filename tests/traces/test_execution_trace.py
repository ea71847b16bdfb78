"""Tests of the execution-trace node table and its data dependencies, real and hand-built."""

from __future__ import annotations

import difflib
import gzip
import json
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path

import msgspec
import networkx as nx
import numpy as np
import pytest

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces._decode import DecodedFile, decode_file
from bottleneck_oracle.traces.execution_trace import (
    ExecutionTrace,
    data_dependencies,
    read_execution_trace,
    thread_of_rf,
)

REAL = Path(__file__).resolve().parents[3] / "shared" / "traces" / "real"
SIMPLE_ADD = "hta/execution_trace/benchmark_simple_add_et.json.gz"
LINEAR = "param/linear_et_kineto/linear_et.json.gz"
DLRM = [f"param/dlrm_8rank_et/dlrm_eg_{rank}.json.gz" for rank in range(8)]
ALL_ET = [SIMPLE_ADD, LINEAR, *DLRM]
PROCESS = "[pytorch|profiler|execution_trace|process]"


def _kineto_of(et_name: str) -> Path:
    if et_name == SIMPLE_ADD:
        return REAL / "hta/execution_trace/benchmark_simple_add_trace.json.gz"
    if et_name == LINEAR:
        return REAL / "param/linear_et_kineto/linear_kineto.json.gz"
    rank = et_name.rsplit("_", 1)[1].split(".")[0]
    (path,) = (REAL / "param/dlrm_8rank_kineto").glob(f"worker{rank}_*.json.gz")
    return path


@lru_cache(maxsize=None)
def _load(name: str) -> tuple[DecodedFile, ExecutionTrace]:
    path = REAL / name
    doc = decode_file(gzip.decompress(path.read_bytes()))
    return doc, read_execution_trace(doc, path)


@lru_cache(maxsize=None)
def _kineto_ops(et_name: str) -> tuple[dict, ...]:
    """The Kineto ``cpu_op`` and ``user_annotation`` ranges of the paired file."""
    with gzip.open(_kineto_of(et_name)) as f:
        events = json.load(f)["traceEvents"]
    kinds = ("cpu_op", "user_annotation")
    return tuple(e for e in events if e.get("cat") in kinds and e.get("ph") == "X")


def _op_names(trace: ExecutionTrace) -> dict[int, str]:
    return {int(rf): trace.names[n] for rf, n in zip(trace.rf_id, trace.name) if rf > 0}


def _ancestors(doc: DecodedFile) -> dict[int, set[int]]:
    """rf_id -> the rf_ids of all its ancestors."""
    by_id = {node.id: node for node in doc.nodes}
    result: dict[int, set[int]] = {}
    for node in doc.nodes:
        seen: set[int] = set()
        parent = by_id.get(node.parent) if node.parent != node.id else None
        while parent is not None:
            seen.add(parent.rf_id)
            parent = by_id.get(parent.parent) if parent.parent != parent.id else None
        result[node.rf_id] = seen
    return result


@pytest.mark.parametrize(
    ("name", "count"), [(SIMPLE_ADD, 38), (LINEAR, 931)] + [(name, 1675) for name in DLRM]
)
def test_read_execution_trace_node_counts(name: str, count: int) -> None:
    doc, trace = _load(name)
    assert len(trace.node_id) == count
    assert np.all(np.diff(trace.node_id) > 0)
    assert trace.pid == doc.pid and trace.path.name == Path(name).name
    assert trace.node_id.dtype == np.int64 and trace.name.dtype == np.int32
    roots = {trace.names[n] for n, rf in zip(trace.name, trace.rf_id) if rf == 0}
    assert all(root.startswith("[pytorch|profiler|execution_") for root in roots)


def test_read_execution_trace_columns_simple_add() -> None:
    _, trace = _load(SIMPLE_ADD)
    names = _op_names(trace)
    assert trace.pid == 563677
    assert names[22] == names[36] == "aten::add" and names[2] == "aten::rand"
    row = int(np.flatnonzero(trace.rf_id == 4)[0])
    assert (trace.node_id[row], trace.parent[row], trace.tid[row]) == (8, 4, 1)


def _exact_match_rate(name: str) -> float:
    """Share of ET operators whose rf_id is the External id of a same-named Kineto op."""
    _, trace = _load(name)
    by_external = {e["args"]["External id"]: e["name"] for e in _kineto_ops(name)}
    names = _op_names(trace)
    return sum(by_external.get(rf) == op for rf, op in names.items()) / len(names)


@pytest.mark.parametrize(
    ("name", "rate"), [(SIMPLE_ADD, 36 / 36), (LINEAR, 218 / 928)] + [(n, 79 / 1672) for n in DLRM]
)
def test_rf_id_external_id_match_rate(name: str, rate: float) -> None:
    # rf_id == External id joins the same op only in a single-threaded trace whose
    # profiler saw no extra ranges; Kineto numbers cpu ops per thread buffer.
    doc, _ = _load(name)
    assert {e["pid"] for e in _kineto_ops(name) if e["cat"] == "cpu_op"} == {doc.pid}
    assert _exact_match_rate(name) == pytest.approx(rate, abs=1e-9)


def _thread_aligned_share(name: str) -> float:
    """Share of ET operators matched by name, thread by thread, in id order."""
    _, trace = _load(name)
    et_threads: dict[int, list[str]] = defaultdict(list)
    for rf, tid, n in sorted(zip(trace.rf_id, trace.tid, trace.name)):
        if rf > 0:
            et_threads[int(tid)].append(trace.names[n])
    kineto_threads: dict[int, list[str]] = defaultdict(list)
    for event in sorted(_kineto_ops(name), key=lambda e: e["args"]["External id"]):
        kineto_threads[event["tid"]].append(event["name"])
    matched = 0
    for et_ops, kineto_ops in zip(et_threads.values(), kineto_threads.values()):
        blocks = difflib.SequenceMatcher(None, et_ops, kineto_ops, autojunk=False)
        matched += sum(block.size for block in blocks.get_matching_blocks())
    return matched / sum(len(ops) for ops in et_threads.values())


@pytest.mark.parametrize("name", [SIMPLE_ADD, LINEAR, DLRM[0], DLRM[7]])
def test_thread_order_matches_kineto_better_than_rf_id(name: str) -> None:
    assert _thread_aligned_share(name) >= 0.998


@pytest.mark.parametrize("name", ALL_ET)
def test_data_dependencies_real_invariants(name: str) -> None:
    doc, trace = _load(name)
    deps = data_dependencies(doc)
    assert deps.dtype == np.int64 and deps.ndim == 2 and deps.shape[1] == 2 and len(deps) > 0
    assert len(np.unique(deps, axis=0)) == len(deps)
    assert set(deps.ravel().tolist()) <= set(_op_names(trace))
    graph = nx.DiGraph(deps.tolist())
    assert nx.is_directed_acyclic_graph(graph)
    ancestors = _ancestors(doc)
    assert not any(p in ancestors[c] or c in ancestors[p] for p, c in deps.tolist())
    node_of = dict(zip(trace.rf_id.tolist(), trace.node_id.tolist()))
    assert all(node_of[p] < node_of[c] for p, c in deps.tolist())


def test_data_dependencies_simple_add_by_hand() -> None:
    # rand (2, 5) -> both adds; zeros -> to (returns self, so a write) -> mul; the second
    # zeros reuses storage 20 and is the only producer the second to sees.
    doc, _ = _load(SIMPLE_ADD)
    expected = [(2, 22), (2, 36), (5, 22), (5, 36), (11, 15), (15, 16), (25, 29), (29, 30)]
    assert data_dependencies(doc).tolist() == [list(pair) for pair in expected]


def test_data_dependencies_linear_forward_and_backward() -> None:
    doc, trace = _load(LINEAR)
    names = _op_names(trace)
    deps = {tuple(pair) for pair in data_dependencies(doc).tolist()}
    # aten::linear (rf 1) writes storage 19, aten::relu (rf 7) reads it; relu writes
    # storage 23, which ReluBackward0 (rf 861, backward thread) reads as a saved tensor
    # with another tensor id, through its child aten::threshold_backward.
    assert (names[1], names[7], names[861]) == ("aten::linear", "aten::relu", "ReluBackward0")
    assert {(1, 7), (7, 861)} <= deps
    assert (2, 7) not in deps  # aten::t is nested in aten::linear: lifted to rf 1
    tids = thread_of_rf(trace, np.array([1, 7, 861]))
    assert tids.tolist() == [1, 1, 2]


@pytest.mark.parametrize("name", DLRM)
def test_data_dependencies_dlrm_cross_thread(name: str) -> None:
    doc, trace = _load(name)
    deps = data_dependencies(doc)
    crossing = thread_of_rf(trace, deps[:, 0]) != thread_of_rf(trace, deps[:, 1])
    names = _op_names(trace)
    pairs = {(names[p], names[c]) for p, c in deps[crossing].tolist()}
    assert ("aten::relu", "ReluBackward0") in pairs
    assert ("c10d::allreduce_", "aten::addcdiv_") in pairs


def _node(node_id: int, rf_id: int, name: str, parent: int, tid: int, **tensors: list) -> dict:
    ins, outs = tensors.get("inputs", []), tensors.get("outputs", [])
    return {
        "id": node_id, "rf_id": rf_id, "name": name, "parent": parent, "tid": tid,
        "inputs": ins, "input_types": ["Tensor(float)"] * len(ins),
        "outputs": outs, "output_types": ["Tensor(float)"] * len(outs),
    }  # fmt: skip


def _tensor(tensor_id: int, storage_id: int) -> list:
    return [tensor_id, storage_id, 0, 16, 4, "cuda:0"]


def _tiny_document() -> DecodedFile:
    """Two threads; the comments give each op's rf_id and the edges it should get."""
    x, w, y, r, g = (_tensor(10 + i, 100 + i) for i in range(5))
    y_view = _tensor(15, y[1])  # a view of y: same storage, new tensor id
    s = _tensor(16, 0)  # storage 0: keyed on the tensor id
    cat = _node(14, 11, "aten::cat", 2, 1, inputs=[[g, r]])
    cat["input_types"] = ["GenericList[Tensor(float),Tensor(float)]"]
    nodes = [
        _node(1, 0, PROCESS, 1, 0),
        _node(2, 0, "[pytorch|profiler|execution_trace|thread]", 1, 1),
        _node(3, 0, "[pytorch|profiler|execution_trace|thread]", 1, 2),
        _node(4, 1, "aten::empty", 2, 1, outputs=[x]),
        _node(5, 2, "aten::fill_", 2, 1, inputs=[x], outputs=[x]),  # in-place: 1 -> 2
        _node(6, 3, "aten::linear", 2, 1, inputs=[x, w], outputs=[y]),  # 2 -> 3
        _node(7, 4, "aten::t", 6, 1, inputs=[w], outputs=[_tensor(20, w[1])]),
        _node(8, 5, "aten::addmm", 6, 1, inputs=[x, _tensor(20, w[1])], outputs=[y]),
        _node(9, 6, "aten::view", 2, 1, inputs=[y], outputs=[y_view]),  # 3 -> 6
        _node(10, 7, "aten::relu", 2, 1, inputs=[y], outputs=[r]),  # 3 -> 7, not 6 -> 7
        _node(11, 8, "## backward ##", 2, 1),
        _node(12, 9, "AddmmBackward0", 3, 2, inputs=[r], outputs=[g]),  # 7 -> 9, thread 2
        _node(13, 10, "aten::mm", 12, 2, inputs=[r, x], outputs=[g]),  # 2 -> 9
        cat,  # 9 -> 11 and 7 -> 11
        _node(15, 12, "aten::ones", 2, 1, outputs=[s]),
        _node(16, 13, "aten::neg", 2, 1, inputs=[s], outputs=[_tensor(30, 130)]),  # 12 -> 13
    ]
    body = {"schema": "1.0.1", "pid": 4242, "nodes": nodes[::-1]}  # files list nodes post-order
    return decode_file(msgspec.json.encode(body))


def test_data_dependencies_tiny_document() -> None:
    doc = _tiny_document()
    trace = read_execution_trace(doc, Path("tiny_et.json"))
    deps = data_dependencies(doc)
    expected = [(1, 2), (2, 3), (2, 9), (3, 6), (3, 7), (7, 9), (7, 11), (9, 11), (12, 13)]
    assert deps.tolist() == [list(pair) for pair in expected]
    crossing = thread_of_rf(trace, deps[:, 0]) != thread_of_rf(trace, deps[:, 1])
    assert deps[crossing].tolist() == [[2, 9], [7, 9], [9, 11]]
    assert trace.node_id.tolist() == list(range(1, 17)) and trace.pid == 4242


def test_thread_of_rf_unknown_ids() -> None:
    trace = read_execution_trace(_tiny_document(), Path("tiny_et.json"))
    assert thread_of_rf(trace, np.array([0, 9, 99, -1])).tolist() == [-1, 2, -1, -1]


def test_data_dependencies_without_nodes_is_empty() -> None:
    assert data_dependencies(DecodedFile()).shape == (0, 2)


@pytest.mark.parametrize("body", [{"schema": "1.0.1", "pid": 7}, {"schema": "1.0.1", "nodes": []}])
def test_read_execution_trace_without_nodes_raises(body: dict) -> None:
    doc = decode_file(msgspec.json.encode(body))
    with pytest.raises(TraceFormatError) as info:
        read_execution_trace(doc, Path("/tmp/rank0_et.json.gz"))
    message = str(info.value)
    assert message.startswith("rank0_et.json.gz:") and "nodes" in message
    assert "\n" not in message


def test_read_execution_trace_unknown_parent_makes_a_root() -> None:
    nodes = [_node(1, 0, PROCESS, 1, 0), _node(2, 1, "x", 9, 1)]
    doc = decode_file(msgspec.json.encode({"nodes": nodes}))
    trace = read_execution_trace(doc, Path("bad_et.json"))
    assert trace.node_id.tolist() == [1, 2] and trace.parent.tolist() == [1, 2]


def test_read_execution_trace_skips_damaged_nodes() -> None:
    # a repeated id, an id that is text, an id beyond int64: each costs its node only
    nodes = [_node(1, 0, PROCESS, 1, 0), _node(1, 1, "x", 1, 1), _node(2, 2, "y", 1, 1),
             {**_node(3, 3, "z", 1, 1), "id": "three"}, _node(2**70, 4, "w", 1, 1)]
    skipped: Counter[str] = Counter()
    doc = decode_file(msgspec.json.encode({"nodes": nodes}), skipped)
    trace = read_execution_trace(doc, Path("dup_et.json"), skipped)
    assert trace.node_id.tolist() == [1, 2]
    assert skipped == {"node: duplicate id": 1, "node: bad id": 2}


def test_read_execution_trace_without_usable_nodes_raises() -> None:
    skipped: Counter[str] = Counter()
    doc = decode_file(msgspec.json.encode({"nodes": [{"id": None}, 5]}), skipped)
    with pytest.raises(TraceFormatError) as info:
        read_execution_trace(doc, Path("bad_et.json"), skipped)
    assert str(info.value) == ("bad_et.json: no usable execution-trace 'nodes'; 2 skipped "
                               "(node: bad id: 1, node: not an object: 1)")


def test_chakra_layout_of_torch_2_13_reads_like_the_flat_one() -> None:
    # torch 2.13 writes schema 1.1.1-chakra: scalars in `attrs`, the parent in `ctrl_deps`,
    # inputs/outputs as objects of values/shapes/types/strides
    def node(node_id: int, rf: int, name: str, parent: int, ins: list, outs: list) -> dict:
        return {"id": node_id, "name": name, "ctrl_deps": parent,
                "inputs": {"values": ins, "shapes": [[] for _ in ins], "types": ["Tensor(float)"] * len(ins),
                           "strides": [[] for _ in ins]},
                "outputs": {"values": outs, "shapes": [[] for _ in outs], "types": ["Tensor(float)"] * len(outs),
                            "strides": [[] for _ in outs]},
                "attrs": [{"name": "rf_id", "type": "uint64", "value": rf}, {"name": "tid", "type": "uint64", "value": 1}]}
    x = [7, 70, 0, 16, 4, "cpu"]
    body = {"schema": "1.1.1-chakra.0.0.4", "pid": 9, "nodes": [
        node(1, 0, PROCESS, 1, [], []), node(2, 0, "[pytorch|profiler|execution_trace|thread]", 1, [], []),
        node(3, 5, "aten::empty", 2, [], [x]), node(4, 6, "aten::relu", 2, [x], [])]}
    doc = decode_file(msgspec.json.encode(body))
    trace = read_execution_trace(doc, Path("chakra.json"))
    assert trace.rf_id.tolist() == [0, 0, 5, 6] and trace.parent.tolist() == [1, 1, 2, 2]
    assert trace.tid.tolist() == [1, 1, 1, 1]
    assert data_dependencies(doc).tolist() == [[5, 6]]


def test_late_parent_moves_under_an_earlier_ancestor() -> None:
    # node 4 names parent 6, which started after it (a gloo op recorded by another thread)
    nodes = [_node(1, 0, PROCESS, 1, 0), _node(2, 1, "a", 1, 1), _node(3, 2, "b", 2, 1),
             _node(4, 3, "gloo:all_reduce", 6, 1), _node(5, 4, "c", 3, 1), _node(6, 5, "d", 5, 1)]
    doc = decode_file(msgspec.json.encode({"schema": "1.0.1", "pid": 1, "nodes": nodes}))
    trace = read_execution_trace(doc, Path("late.json"))
    assert dict(zip(trace.node_id.tolist(), trace.parent.tolist()))[4] == 3  # 6 → 5 → 3
