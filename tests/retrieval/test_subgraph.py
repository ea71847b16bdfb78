"""Critical-subgraph retrieval of a real 2-rank capture: the path of the straggling step and around it."""

from __future__ import annotations

import pytest

from bottleneck_oracle.errors import ConfigError, QueryError
from bottleneck_oracle.retrieval import critical_subgraph
from tests.retrieval.conftest import Memory


def test_critical_subgraph_of_step_5_holds_the_path_and_its_neighbours(memory: Memory) -> None:
    tid = memory.gpt.report.trace_id
    sub = critical_subgraph(memory.store, tid, 5, 1, hops=1)
    keys = {n["key"] for n in sub.nodes}
    on_path = {n["key"] for n in sub.nodes if n["hops"] == 0}
    assert on_path and all(n["on_path"] for n in sub.nodes if n["hops"] == 0)
    assert {n["hops"] for n in sub.nodes} == {0, 1}
    assert {o["key"] for o in sub.top_ops} <= on_path  # every top contributor is on the path
    assert sub.top_ops[0]["name"] == "ProfilerStep#5"  # the host pause sits on the step's own span
    idx = {n["idx"] for n in sub.nodes}
    assert sub.edges and all(e["src"] in idx and e["dst"] in idx for e in sub.edges)
    assert {"NEST", "THREAD_NEXT"} <= {e["type"] for e in sub.edges}
    assert sub.collectives[0]["slowest_rank"] == 1
    assert {f["category"] for f in sub.findings} == {"host_pause", "straggler_rank"}
    assert sub.step_row["wall_ms"] == pytest.approx(179.484, abs=1e-3)
    narrow = critical_subgraph(memory.store, tid, 5, 1, hops=0)
    assert {n["key"] for n in narrow.nodes} == on_path and len(keys) > len(on_path)


def test_a_step_or_rank_the_trace_lacks_names_those_it_has(memory: Memory) -> None:
    tid = memory.gpt.report.trace_id
    with pytest.raises(ConfigError) as no_step:
        critical_subgraph(memory.store, tid, 42, 0)
    assert "no step 42" in str(no_step.value) and "2, 3, 4, 5, 6, 7" in str(no_step.value)
    with pytest.raises(ConfigError) as no_rank:
        critical_subgraph(memory.store, tid, 5, 9)
    assert "no rank 9" in str(no_rank.value) and "0, 1" in str(no_rank.value)
    with pytest.raises(ConfigError) as no_trace:
        critical_subgraph(memory.store, "0000", 5, 0)
    assert "0000" in str(no_trace.value)
    with pytest.raises(QueryError):
        critical_subgraph(memory.store, tid, 5, 1, hops=9)
