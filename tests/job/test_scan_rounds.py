"""Tests for job/scan_rounds.py: a rank's trace kept on its node between rounds, taken by the last, read again
where none was kept."""

from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.job.scan import scan
from bottleneck_oracle.job.scan_rounds import KeptJob, keys_task, summary_task
from bottleneck_oracle.job.summary import JobFrame, match_job
from bottleneck_oracle.executor import LocalExecutor
from bottleneck_oracle.traces import read_trace, trace_files
from tests.conftest import REPO
from tests.test_executor import _same

EXAMPLE = REPO / "examples" / "gpt_2rank"


def test_a_rank_s_second_round_reads_its_file_again_where_round_one_left_nothing(tmp_path: Path) -> None:
    """On a cluster, round 2 may run on another node than round 1: the rank is read again, to the same summary."""
    files = [f for f, _ in trace_files([EXAMPLE])]
    read = [r for r in (keys_task((f, False, tmp_path / f"{i}.trace")) for i, f in enumerate(files)) if r]
    files = [r[1] for r in read]
    keys = [r[3] for r in read]
    jobs, _ = match_job(keys, JobFrame.of(keys))
    spill = tmp_path / f"{[f for f, _ in trace_files([EXAMPLE])].index(files[0])}.trace"
    assert spill.exists()
    spilled = summary_task((files[0], True, spill, jobs[0], None, True, False))
    assert spill.exists()  # kept for the last round
    summary_task((files[0], True, spill, jobs[0], None, True, True))
    assert not spill.exists()  # taken: no round follows
    again = summary_task((files[0], True, spill, jobs[0], None, True, False))
    _same(spilled, again, "summary")


def _rank_and_state(graph, job, arg, state):  # type: ignore[no-untyped-def]
    """A round after the scan's: the rank's node count and what its round before left in its state."""
    before = state.read_text() if state.exists() else None
    state.write_text(f"{arg}")
    return len(graph()), before, state


def test_rounds_after_the_scan_s_read_the_kept_ranks_and_keep_a_state_until_the_last() -> None:
    """``scan(then=...)``: each rank's graph is the job's (its nodes), each round reads what the one before left
    in the rank's state, and the last round removes the states and the traces."""
    seen = []

    def then(kept: KeptJob, found):  # type: ignore[no-untyped-def]
        first = kept.map(_rank_and_state, ["one"] * len(kept.items), "first")
        second = kept.map(_rank_and_state, ["two"] * len(kept.items), "second", last=True)
        seen.append((first, second, [item[2] for item in kept.items]))
        return found.ranks

    s = scan([EXAMPLE], LocalExecutor(1), critical_paths=False, then=then)
    first, second, spills = seen[0]
    g = analyze(read_trace(EXAMPLE)).graph
    assert s.then == s.ranks and [n for n, _, _ in first] == [int((g.rank == r).sum()) for r in s.ranks]
    assert [b for _, b, _ in first] == [None, None] and [b for _, b, _ in second] == ["one", "one"]
    assert not any(state.exists() for _, _, state in second) and not any(p.exists() for p in spills)
