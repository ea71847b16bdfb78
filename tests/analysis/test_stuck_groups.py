"""The groups a job is stuck in, read from the dumps: counters read in the right numbering, calls the dumps
do not hold counted, ties broken by the sibling groups."""

from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.analysis.stuck_groups import counters, stuck_groups, unrecorded_calls
from bottleneck_oracle.traces.flight_recorder import read_flight_record
from tests.traces.test_flight_recorder import dump, entry, write


def test_status_counters_numbered_by_every_call_are_not_read_as_collective_numbers(tmp_path: Path) -> None:
    # gloo: 6 sends and receives (unrecorded) came before the only collective, op id 7; the status says 7
    only = dict(entry(1, record=0), op_id=7)
    status = {"0": {"last_enqueued_collective": 7, "last_started_collective": -1, "last_completed_collective": 7}}
    record = read_flight_record(write(tmp_path, {0: dump([only], status=status)}))
    assert counters(record, 0, "0") == (1, 1)
    assert unrecorded_calls(record) == {0: 6}


def test_calls_a_wrapped_ring_dropped_are_not_counted_as_unrecorded(tmp_path: Path) -> None:
    # the ring kept op ids 5..6 only (the first record is gone): nothing is missing from what it holds
    kept = [dict(entry(s, record=s + 10), op_id=s) for s in (5, 6)]
    record = read_flight_record(write(tmp_path, {0: dump(kept)}))
    assert unrecorded_calls(record) == {}
    assert stuck_groups(record) == []


def test_one_group_stuck_with_who_waits_and_who_never_came(tmp_path: Path) -> None:
    calls = {0: [entry(1), entry(2, done=False)], 1: [entry(1), entry(2, done=False)], 2: [entry(1)]}
    [stuck] = stuck_groups(read_flight_record(write(tmp_path, {r: dump(c, "[0, 1, 2]") for r, c in calls.items()})))
    assert (stuck.group, stuck.seq, stuck.waiting, stuck.behind, stuck.cause, stuck.culprits) == (
        "0", 2, (0, 1), {2: 1}, "behind", (2,))


def test_an_even_split_is_broken_by_the_sibling_groups(tmp_path: Path) -> None:
    def in_group(name: str, seq: int, op: str = "all_reduce", done: bool = True) -> dict:
        e = entry(seq, op, group=name, done=done)
        e["process_group"] = (name, "dp")
        return e

    dumps = {0: dump([in_group("a", 1), in_group("a", 2)]), 1: dump([in_group("a", 1), in_group("a", 2)]),
             2: dump([in_group("b", 1), in_group("b", 2, done=False)]),
             3: dump([in_group("b", 1), in_group("b", 2, "broadcast", done=False)])}
    for d in dumps.values():
        d["pg_config"] = {}
    [stuck] = stuck_groups(read_flight_record(write(tmp_path, dumps)))
    assert (stuck.group, stuck.culprits, stuck.waiting) == ("b", (3,), (2,))
    assert stuck.divergence.by_siblings and stuck.divergence.expected == "all_reduce"
