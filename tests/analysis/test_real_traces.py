"""The analysis on the real traces shared beside the checkout, with networkx and HTA as referees."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.collectives import collective_arrivals
from bottleneck_oracle.graph.types import EdgeType, NodeKind
from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.traces import read_trace
from tests.conftest import REAL

ALL_FILES = sorted(p for p in REAL.rglob("*.json*"))
ET_FILES = {"benchmark_simple_add_et.json.gz", "linear_et.json.gz"} | {f"dlrm_eg_{i}.json.gz" for i in range(8)}


@pytest.fixture(scope="module")
def cp_simple_add() -> Analysis:
    return analyze(read_trace(REAL / "hta" / "cp_simple_add"))


@pytest.fixture(scope="module")
def dlrm() -> Analysis:
    return analyze(read_trace(REAL / "param" / "dlrm_8rank_kineto", workers=2))


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_file_parses_or_fails_clearly(path: Path) -> None:
    if path.name in ET_FILES:
        with pytest.raises(TraceFormatError) as err:
            read_trace(path)
        assert str(err.value).startswith(path.name) and "Kineto" in str(err.value)
        assert "\n" not in str(err.value)
        return
    a = analyze(read_trace(path))
    assert a.steps
    for r in a.steps:
        assert sum(r.breakdown_ns.values()) == r.wall_ns > 0 or r.wall_ns == 0


def _to_networkx(a: Analysis) -> nx.DiGraph:
    pg = a.points
    g = nx.DiGraph()
    g.add_nodes_from(range(len(pg.t)))
    for s, d, w in zip(pg.src.tolist(), pg.dst.tolist(), pg.weight.tolist()):
        if not g.has_edge(s, d) or g[s][d]["weight"] < w:
            g.add_edge(s, d, weight=w)
    return g


@pytest.mark.parametrize("which", ["cp_simple_add", "dlrm"])
def test_critical_path_is_a_longest_path_by_networkx(which: str, request: pytest.FixtureRequest) -> None:
    a: Analysis = request.getfixturevalue(which)
    pg = a.points
    g = _to_networkx(a)
    assert nx.is_directed_acyclic_graph(g)
    for r in a.steps:
        sink = next(p for p in range(1, len(pg.t), 2) if pg.t[p] == r.end_ns and p // 2 in set(r.path_node.tolist()))
        sub = g.subgraph(nx.ancestors(g, sink) | {sink})
        expected = nx.dag_longest_path_length(sub, weight="weight")
        # our longest path to the sink starts at the source point, time 0 of the trace
        assert expected == r.end_ns - pg.t[-1]
        assert int(r.path_dur_ns.sum()) == r.wall_ns


def test_cp_simple_add_matches_hta_overlay_except_where_ours_is_more_right(cp_simple_add: Analysis) -> None:
    doc = json.loads(gzip.decompress((REAL / "hta" / "cp_e2e_simple_add_output" /
                                      "overlaid_critical_path_trace.json.gz").read_bytes()))
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    hta = {(e["name"], int(e["ts"])) for e in xs if e.get("args", {}).get("critical")}
    a = cp_simple_add
    g, (r,) = a.graph, a.steps
    origin = g.trace.origin_ns
    ours = {(g.node_name(n), round((int(g.start_ns[n]) + origin) / 1000))
            for n in set(r.path_node.tolist()) if n >= 0 and g.kind[n] != NodeKind.ANNOTATION}
    both = hta & ours
    assert len(both) >= 0.98 * len(hta)  # 618 of HTA's 624 critical events are on our path too
    cat = {(e["name"], int(e["ts"])): (e["cat"], e["ts"] + e.get("dur", 0)) for e in xs}
    hta_gpu_only = sorted(k for k in hta - ours if cat[k][0] in ("kernel", "gpu_memset", "gpu_memcpy"))
    # The only difference: where HTA goes through the last forward GEMMs (stream 7,
    # ~1694040010096363-96880), the CPU op launching them, aten::linear, ends 15 µs after the last
    # of those kernels: the kernels had slack, the CPU was the bottleneck, our path follows the CPU.
    assert hta_gpu_only == sorted(k for k in hta - ours)
    late_gemms = [k for k in hta_gpu_only if k[1] >= 1694040010096000]
    assert len(late_gemms) == 6
    last_gpu_end = max(cat[k][1] for k in late_gemms)
    linear = [n for n in range(len(g)) if g.node_name(n) == "aten::linear"
              and abs((int(g.start_ns[n]) + origin) / 1000 - 1694040010096553) < 1]
    assert linear and (int(g.end_ns[linear[0]]) + origin) / 1000 > last_gpu_end
    assert linear[0] in set(r.path_node.tolist())


def test_dlrm_every_collective_matched_across_eight_ranks(dlrm: Analysis) -> None:
    g = dlrm.graph
    comm_kernels = np.flatnonzero(g.kind == NodeKind.COMM)
    assert len(comm_kernels) == 8 * 8
    assert len(g.collectives) == 8 and g.collectives.reliable.all()
    assert (g.collective[comm_kernels] >= 0).all()
    arrivals = collective_arrivals(g)
    assert [c.ranks for c in arrivals] == [tuple(range(8))] * 8
    for c in arrivals:
        starts = g.start_ns[list(c.members)]
        assert c.last_rank == c.ranks[int(np.argmax(starts))]
        ends = g.end_ns[list(c.members)]
        assert ends.min() >= starts.max()  # nobody left before the last rank arrived
    first = arrivals[0]
    assert (first.kind, first.last_rank) == ("sendrecv", 7) and first.lateness_ns > 4_000_000


def test_dlrm_straggler_named(dlrm: Analysis) -> None:
    # rank 7 arrives late at the first all-to-all, and it is late because its host is the bottleneck:
    # its GPU idles while the CPU issues small kernels
    found = {(f.category.value, f.step, f.ranks) for f in dlrm.findings}
    assert ("straggler_rank", 10, (7,)) in found and ("launch_overhead", None, (7,)) in found
    assert {f.ranks for f in dlrm.findings if f.category.value == "straggler_rank"} == {(7,)}


def _path_nodes(a: Analysis) -> list[list[int]]:
    return [[int(n) for n in r.path_node] for r in a.steps]


@pytest.mark.parametrize("kineto,et", [("param/dlrm_8rank_kineto", "param/dlrm_8rank_et"),
                                       ("param/linear_et_kineto", None)])
def test_real_execution_traces_link_but_leave_satisfied_paths_alone(kineto: str, et: str | None) -> None:
    files = [REAL / kineto] + ([REAL / et] if et else [])
    plain_files = [p for p in (REAL / kineto).iterdir() if "_et" not in p.name]
    with_et = analyze(read_trace(files, workers=2))
    plain = analyze(read_trace(plain_files, workers=2))
    assert len(with_et.graph.trace.data_deps) > 300  # every ET op and dependency found its Kineto op
    data = with_et.points.origin == EdgeType.DATA
    assert data.sum() > 100  # cross-thread ones (forward -> backward, gradients -> optimizer)
    # In these jobs every consumer was released later by program order or a thread hand-off
    # (it sits inside an autograd wrapper that started after the producer ended), so no data
    # edge binds and every critical path is the one found without the execution trace.
    assert not np.isin(np.flatnonzero(data), with_et.points.binding).any()
    assert _path_nodes(with_et) == _path_nodes(plain)
