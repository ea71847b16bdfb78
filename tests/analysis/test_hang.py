"""The hang verdict on dumps whose truth is known by construction: each way a job hangs, named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.hang import hang_verdict
from bottleneck_oracle.traces.flight_recorder import read_flight_record
from tests.traces.test_flight_recorder import dump, entry, write


def verdict(tmp_path: Path, dumps: dict[int, dict]):
    return hang_verdict(read_flight_record(write(tmp_path, dumps)))


def done(n: int, **kw) -> list[dict]:
    return [entry(s, **kw) for s in range(1, n + 1)]


def test_a_rank_one_collective_behind_is_the_culprit(tmp_path: Path) -> None:
    ranks = "[0, 1, 2, 3]"
    v = verdict(tmp_path, {r: dump(done(3) + ([] if r == 2 else [entry(4, done=False, line=12)]), ranks)
                           for r in range(4)})
    assert (v.verdict, v.cause, v.culprit_ranks, v.waiting_ranks) == ("hang", "behind", (2,), (0, 1, 3))
    assert v.collective["seq"] == 4 and v.collective["op"] == "all_reduce"
    assert v.first_divergence is None
    assert v.where[0] == "/job/train.py:12" and v.where[2] == "/job/train.py:10"  # the culprit's last call
    assert "Rank 2 never entered it" in " ".join(v.explanation)


def test_a_skipped_collective_shows_as_the_first_divergence(tmp_path: Path) -> None:
    calls = {r: done(3) + [entry(4, done=False, line=12)] for r in (0, 2)}
    calls[1] = done(3) + [entry(4, "broadcast", done=False, line=13)]  # rank 1 skipped #4's all_reduce
    v = verdict(tmp_path, {r: dump(c, "[0, 1, 2]") for r, c in calls.items()})
    assert (v.cause, v.culprit_ranks, v.waiting_ranks) == ("mismatch", (1,), (0, 2))  # rank 1 waits elsewhere
    d = v.first_divergence
    assert (d.seq, d.kind, d.expected, d.found) == (4, "op", "all_reduce", {1: "broadcast"})
    assert v.where[1] == "/job/train.py:13"


def test_sizes_that_differ_are_named(tmp_path: Path) -> None:
    calls = {r: done(2) + [entry(3, done=False, sizes=((8,),) if r == 0 else ((4,),))] for r in range(3)}
    v = verdict(tmp_path, {r: dump(c, "[0, 1, 2]") for r, c in calls.items()})
    assert (v.cause, v.culprit_ranks) == ("mismatch", (0,))
    assert (v.first_divergence.kind, v.first_divergence.found) == ("sizes", {0: "[8]"})


def test_a_rank_without_a_dump_is_named(tmp_path: Path) -> None:
    v = verdict(tmp_path, {r: dump(done(2) + [entry(3, done=False)], "[0, 1, 2]") for r in (0, 1)})
    assert (v.cause, v.culprit_ranks, v.missing_dumps, v.waiting_ranks) == ("missing_dump", (2,), (2,), (0, 1))


def test_every_rank_inside_and_none_done_is_a_stall(tmp_path: Path) -> None:
    v = verdict(tmp_path, {r: dump(done(2) + [entry(3, done=False)]) for r in (0, 1)})
    assert (v.verdict, v.cause, v.culprit_ranks, v.waiting_ranks) == ("hang", "stalled", (), (0, 1))


def test_a_clean_job_has_no_hang_and_a_missing_rank_makes_it_unknown(tmp_path: Path) -> None:
    clean = verdict(tmp_path / "a", {r: dump(done(3)) for r in (0, 1)})
    assert (clean.verdict, clean.culprit_ranks, clean.collective) == ("none", (), None)
    unsure = verdict(tmp_path / "b", {r: dump(done(3), "[0, 1, 2]") for r in (0, 1)})
    assert (unsure.verdict, unsure.missing_dumps) == ("unknown", (2,))


def test_ranks_split_evenly_name_no_culprit(tmp_path: Path) -> None:
    calls = {r: done(1) + [entry(2, "broadcast" if r % 2 else "all_reduce", done=False)] for r in range(4)}
    v = verdict(tmp_path, {r: dump(c, "[0, 1, 2, 3]") for r, c in calls.items()})
    assert v.cause == "mismatch" and v.culprit_ranks == ()
    assert "split evenly" in " ".join(v.explanation)


def test_status_counters_decide_over_the_entries(tmp_path: Path) -> None:
    # NCCL: the entry of a finished collective may still read "started"; pg_status says it completed
    status = {"0": {"last_enqueued_collective": 2, "last_started_collective": 2, "last_completed_collective": 2}}
    calls = {0: dump([entry(1), dict(entry(2, done=False), state="started")], status=status),
             1: dump(done(2) + [entry(3, done=False)])}
    v = verdict(tmp_path, calls)
    assert (v.culprit_ranks, v.waiting_ranks, v.collective["seq"]) == ((0,), (1,), 3)


def test_a_hang_passed_on_to_another_group_is_traced_to_its_start(tmp_path: Path) -> None:
    # group "a" = ranks 0, 1. Rank 1 skips a#2 and goes on to the world group's #3, where rank 2 joins it; rank 0
    # sits in a#2. Each group's culprit waits in the other group (a deadlock): the stuck call entered first, a#2,
    # is where it began, and rank 1, which never entered it, is the culprit.
    def a(seq, done=True, rec=0):
        e = entry(seq, group="a", done=done, line=20, record=rec)
        e["process_group"] = ("a", "dp")
        return e

    world = "[0, 1, 2]"
    d0 = dump([entry(1, record=0), entry(2, record=1), a(1, rec=2), a(2, done=False, rec=3)], world)
    d0["pg_config"]["a"] = {"name": "a", "desc": "dp", "ranks": "[0, 1]"}
    d1 = dump([entry(1, record=0), entry(2, record=1), a(1, rec=2), entry(3, done=False, line=30, record=3)], world)
    d1["pg_config"]["a"] = {"name": "a", "desc": "dp", "ranks": "[0, 1]"}
    d2 = dump([entry(1, record=0), entry(2, record=1), entry(3, done=False, line=30, record=2)], world)
    v = verdict(tmp_path, {0: d0, 1: d1, 2: d2})
    assert v.verdict == "hang"
    assert {g.group for g in v.groups} == {"0", "a"}
    assert v.groups[0].group == "a" and v.culprit_ranks == (1,)  # a#2 was entered first
    assert "deadlock" in " ".join(v.explanation)


def test_p2p_receive_without_a_send_names_the_peer(tmp_path: Path) -> None:
    recv = dict(entry(1, "recv 1<-0", done=False), is_p2p=True, p2p_seq_id=3, collective_seq_id=0)
    send_done = dict(entry(1, "send 0->1"), is_p2p=True, p2p_seq_id=2, collective_seq_id=0)
    v = verdict(tmp_path, {0: dump([send_done]), 1: dump([recv])})
    assert (v.verdict, v.cause, v.culprit_ranks, v.waiting_ranks) == ("hang", "p2p", (0,), (1,))
    assert v.collective["p2p"] is True


HANGS = Path(__file__).parents[1] / "data" / "hangs"
FIXTURES = sorted(p for p in HANGS.iterdir() if (p / "manifest.json").exists()) if HANGS.exists() else []


@pytest.mark.parametrize("folder", FIXTURES, ids=[p.name for p in FIXTURES])
def test_real_gloo_hangs_name_the_injected_fault(folder: Path) -> None:
    """Dumps of real hung jobs (capture/hang_job.py): the verdict is the fault the job was given."""
    expected = json.loads((folder / "manifest.json").read_text())["expected"]
    v = hang_verdict(read_flight_record(folder))
    if not expected.get("dumps_show_it", True):  # gloo records no send/recv: a p2p hang leaves no stuck entry
        assert (v.verdict, v.cause) == ("unknown", "unrecorded")  # never "none"
        return
    assert v.verdict == expected["verdict"]
    assert list(v.culprit_ranks) == expected["culprit_ranks"]
    assert list(v.waiting_ranks) == expected["waiting_ranks"]
    assert list(v.missing_dumps) == expected["missing_dumps"]
    if expected["collective"] is None:
        assert v.collective is None
    else:
        got = {k: v.collective[k] for k in ("seq", "op", "group")}
        assert got == {k: expected["collective"][k] for k in ("seq", "op", "group")}
    divergence = v.first_divergence.seq if v.first_divergence else None
    assert divergence == expected["first_divergence_seq"]


def test_every_kind_of_real_hang_has_a_fixture() -> None:
    assert {p.name for p in FIXTURES} >= {"clean", "skip", "skip_json", "sleep", "exit", "size_mismatch",
                                          "subgroup", "p2p"}


@pytest.mark.slow
def test_torchs_own_analyzer_agrees_where_it_answers_and_fails_where_we_answer() -> None:
    """tools/compare_torchfrtrace.py: torchfrtrace on the raw gloo dumps and with an NCCL job's group config."""
    import runpy

    tool = runpy.run_path(str(Path(__file__).parents[2] / "tools" / "compare_torchfrtrace.py"))
    rows = {name: (ours, raw, nccl) for name, ours, raw, nccl in tool["rows"](HANGS)}
    assert all(raw.startswith("fails:") for _, raw, _ in rows.values())  # gloo's dumps stop it
    for name in ("skip", "size_mismatch", "subgroup"):
        culprit = rows[name][2].removeprefix("culprit ")
        assert rows[name][0].endswith(f"culprit {culprit} (mismatch)")
    for name in ("sleep", "sleep_profiled"):
        assert rows[name][2] == "ranks 1 missing from a collective" and "culprit 1 (behind)" in rows[name][0]
    assert rows["clean"] == ("none", rows["clean"][1], "no finding")
    assert rows["exit"][2].startswith("fails:") and "culprit 1 (missing_dump)" in rows["exit"][0]
    assert rows["p2p"][0] == "unknown"  # it says nothing is wrong; we say the dumps cannot show it
