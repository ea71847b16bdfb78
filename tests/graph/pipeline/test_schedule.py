"""The dependency model read off one replica's step: streams, p2p pairs across neighbouring stages, the
collectives after the last compute, and no-ops at a step's edges."""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.graph.pipeline import build_schedule
from bottleneck_oracle.graph.types import EdgeType
from bottleneck_oracle.traces.op_table import OPCODE, read_op_table
from tests.conftest import STRAGGLERS


@pytest.fixture(scope="module")
def st():  # type: ignore[no-untyped-def]
    table = read_op_table(STRAGGLERS / "ST")
    return table, build_schedule(table)


def _op(sched, stage: int, name: str, seq: int) -> int:  # type: ignore[no-untyped-def]
    hit = np.flatnonzero((sched.stage == stage) & (sched.optype == OPCODE[name]) & (sched.seq == seq))
    assert len(hit) == 1, (stage, name, seq)
    return int(hit[0])


def _waits_for(sched, j: int) -> set[int]:  # type: ignore[no-untyped-def]
    return set(sched.dep_src[sched.dep_dst == j].tolist())


def test_one_replica_step_gives_the_ops_of_every_stage(st) -> None:  # type: ignore[no-untyped-def]
    table, sched = st
    first = (table.dp_rank == 0) & (table.step == table.step.min())
    assert len(sched) == int(first.sum()) == 106
    assert sorted(np.unique(sched.stage).tolist()) == [0, 1, 2, 3]


def test_sends_pair_with_the_next_stages_receives_and_computes_wait_for_their_inputs(st) -> None:  # type: ignore[no-untyped-def]
    _, sched = st
    send = _op(sched, 1, "forward-send", 2)
    recv = _op(sched, 2, "forward-recv", 2)
    assert sched.group[send] == sched.group[recv] >= 0 and not sched.all_replicas[sched.group[send]]
    assert _op(sched, 1, "forward-compute", 2) in _waits_for(sched, send)  # the compute made what it sends
    assert recv in _waits_for(sched, _op(sched, 2, "forward-compute", 2))  # the compute needs what it brings
    assert _op(sched, 2, "forward-compute", 1) in _waits_for(sched, recv)  # posted after the previous compute
    back = _op(sched, 3, "backward-send", 0)
    assert sched.group[back] == sched.group[_op(sched, 2, "backward-recv", 0)]
    # no stage sends forward past the last one or backward before the first
    assert not (sched.stage[sched.optype == OPCODE["forward-send"]] == 3).any()
    assert not sched.noop.any()


def test_the_step_ends_with_the_clip_over_every_stage_and_replica_then_the_optimizer(st) -> None:  # type: ignore[no-untyped-def]
    _, sched = st
    clips = [_op(sched, s, "optimizer-clip-main-grad", 0) for s in range(4)]
    assert len({int(sched.group[c]) for c in clips}) == 1 and sched.all_replicas[sched.group[clips[0]]]
    emb = [_op(sched, s, "embedding-grads-all-reduce", 0) for s in (0, 3)]
    assert sched.group[emb[0]] == sched.group[emb[1]]
    for s in range(4):
        assert clips[s] in _waits_for(sched, _op(sched, s, "optimizer", 0))
        rs = _op(sched, s, "grads-reduce-scatter", 0)  # no separate all-reduce: reduce-scatter after the computes
        assert sched.all_replicas[sched.group[rs]]
        assert rs in _waits_for(sched, clips[s])
    types = set(sched.dep_type.tolist())
    assert {EdgeType.THREAD_NEXT, EdgeType.STREAM_NEXT, EdgeType.DATA} <= types


def test_the_first_backward_exchange_is_posted_two_computes_before_the_first_backward(st) -> None:  # type: ignore[no-untyped-def]
    table, sched = st
    # stage 0 of 4 with 4 micro-batches runs F0 F1 F2 F3 B0 ...: the exchange waits for F2, two before B0
    comp = np.flatnonzero((sched.stage == 0) & np.isin(sched.optype, [OPCODE["forward-compute"],
                                                                        OPCODE["backward-compute"]]))
    assert sched.optype[comp][:5].tolist() == [OPCODE["forward-compute"]] * 4 + [OPCODE["backward-compute"]]
    assert _waits_for(sched, _op(sched, 0, "backward-recv", 0)) == {_op(sched, 0, "forward-compute", 2)}


def test_a_receive_posted_after_the_last_compute_is_a_noop_alone(st) -> None:  # type: ignore[no-untyped-def]
    table, _ = st
    first = table.take((table.dp_rank == 0) & (table.step == table.step.min()))
    extra = np.flatnonzero((first.stage == 1) & (first.optype == OPCODE["forward-recv"]))[-1]
    rows = np.append(np.arange(len(first)), extra)
    late = first.take(rows)
    late.start_ns[-1] = late.end_ns.max() + 1_000_000  # a receive at the very end of the step
    late.seq_id[-1] = late.seq_id[late.optype == OPCODE["forward-recv"]].max() + 1
    sched = build_schedule(late)
    j = _op(sched, 1, "forward-recv", int(late.seq_id[-1]))
    assert sched.noop[j] and (sched.group == sched.group[j]).sum() == 1
    assert _waits_for(sched, j) == {_op(sched, 1, "forward-recv", int(late.seq_id[-1]) - 1)}  # its stream only


def test_a_worker_recording_one_op_twice_is_refused(st) -> None:  # type: ignore[no-untyped-def]
    table, _ = st
    twice = table.take(np.append(np.arange(len(table)), 0))
    with pytest.raises(TraceFormatError, match="share an op type and seq_id"):
        build_schedule(twice)
