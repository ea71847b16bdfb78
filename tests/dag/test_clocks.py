"""Host clocks that disagree: the offsets read from shared collectives, and an analysis that then equals
the one of the same job on one clock (simulated jobs whose second node's clock runs ahead, a real gloo
capture with one rank's clock moved, and every real multi-rank folder, whose clocks must stay as they are)."""

from __future__ import annotations

import gzip
import shutil
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import orjson
import pytest

from bottleneck_oracle.dag.analysis import Analysis, analyze
from bottleneck_oracle.dag.build import build_graph
from bottleneck_oracle.dag.clocks import SKEW_MIN_NS, clock_offsets
from bottleneck_oracle.dag.health import HealthCode, trace_health
from bottleneck_oracle.dag.report import analysis_to_dict
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA, REAL
from tests.dag.real_cases import REAL_FOLDERS, real_case

_FILE_TIMES = ("ts_us", "start_us", "end_us")  # where a report points into the files: the files' own clocks, so they differ


@cache
def _job(skew_ms: float) -> Path:
    """16 ranks on 2 nodes (data parallel 4 across them, tensor parallel 4 inside), node 1's clock
    ``skew_ms`` ahead of node 0's; the same job and seed for every skew."""
    out = Path(tempfile.mkdtemp(prefix="oracle-clocks-"))
    synthesize(out, SynthConfig(model="tiny", dp=4, tp=4, steps=4, seed=3, clock_skew_ms=skew_ms))
    return out


def _report(a: Analysis) -> dict[str, object]:
    """The analysis as ``--json --full-paths`` gives it, without the file names and file times."""
    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in _FILE_TIMES and k not in ("files", "health")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x.tolist() if isinstance(x, np.ndarray) else x
    return strip(analysis_to_dict(a, full_paths=True))  # type: ignore[return-value]


@pytest.mark.parametrize("skew_ms", [3.0, -2.5, 0.2])
def test_a_second_node_whose_clock_runs_ahead_is_read_to_the_nanosecond(skew_ms: float) -> None:
    g = build_graph(read_trace(_job(skew_ms)))
    c = clock_offsets(g)
    assert c.offset_ns.tolist() == [0] * 8 + [round(skew_ms * 1e6)] * 8
    assert c.reference.tolist() == [0] * 16 and (c.evidence > 0).all() and (c.spread_ns == 0).all()


@pytest.mark.parametrize("skew_ms", [3.0, -2.5])
def test_once_aligned_the_analysis_is_the_one_on_one_clock(skew_ms: float) -> None:
    """Steps, walls, critical paths, breakdowns and findings equal the job's on one clock, to the ns; the
    report still points into the skewed files at their own times."""
    one_clock, skewed = analyze(read_trace(_job(0.0))), analyze(read_trace(_job(skew_ms)))
    assert _report(skewed) == _report(one_clock)
    shift = round(skew_ms * 1e6)
    assert [i.clock_offset_ns for i in skewed.graph.trace.ranks] == [0] * 8 + [shift] * 8
    (note,) = [n for n in trace_health(skewed) if n.code == HealthCode.CLOCK_SKEW]
    assert f"against rank 0's clock, ranks 8-15 read {abs(skew_ms):.3f} ms {'ahead' if skew_ms > 0 else 'behind'}" \
        in note.message
    assert not [n for n in trace_health(one_clock) if n.code == HealthCode.CLOCK_SKEW]
    # file times: rank 8's steps start skew_ms later in its file than on the job's clock
    start = {(s["step"], s["rank"]): s["start_us"] for s in analysis_to_dict(skewed)["steps"]}
    start0 = {(s["step"], s["rank"]): s["start_us"] for s in analysis_to_dict(one_clock)["steps"]}
    assert start[(1, 8)] == pytest.approx(start0[(1, 8)] + skew_ms * 1000, abs=1e-3)
    assert start[(1, 0)] == start0[(1, 0)]


def test_left_skewed_the_collectives_across_nodes_look_broken() -> None:
    """What the alignment prevents: members that seem to leave before the last one arrived, so no
    cross-rank wait is seen, and another critical path."""
    one_clock = analyze(read_trace(_job(0.0)))
    skewed = analyze(read_trace(_job(3.0)), align_clocks=False)
    assert skewed.graph.collectives.reliable.sum() < one_clock.graph.collectives.reliable.sum()
    assert _report(skewed) != _report(one_clock)


def test_pipeline_stages_joined_only_by_transfers_are_aligned_apart_and_the_note_says_so() -> None:
    """64 ranks, 8 nodes, node k's clock k ms ahead; the two pipeline stages (nodes 0-3, 4-7) share no
    all-reduce: each stage is put on its own first rank's clock, and the note names the stage left apart."""
    out = Path(tempfile.mkdtemp(prefix="oracle-clocks-pp-"))
    synthesize(out, SynthConfig(model="7b", dp=8, tp=4, pp=2, microbatches=2, steps=2, clock_skew_ms=1.0), workers=2)
    a = analyze(read_trace(out))
    assert a.clocks is not None
    node_ms = [(r // 8) % 4 for r in range(64)]  # within each stage, against its first node
    assert (a.clocks.offset_ns // 1_000_000).tolist() == node_ms
    assert a.clocks.reference.tolist() == [0] * 32 + [32] * 32
    (note,) = [n.message for n in trace_health(a) if n.code == HealthCode.CLOCK_SKEW]
    assert "against rank 32's clock, ranks 40-47 read 1.000 ms ahead" in note
    assert "ranks 32-63 share no all-reduce, all-gather or reduce-scatter with rank 0's" in note


def test_a_skew_below_what_one_host_shows_is_left_alone() -> None:
    assert SKEW_MIN_NS > 0.01 * 1e6
    c = clock_offsets(build_graph(read_trace(_job(0.01))))  # 10 µs: within one host's noise
    assert not c.any()


def _moved_capture(src: Path, rank: int, ahead_ms: float) -> Path:
    """A copy of a real capture whose ``rank`` recorded on a clock ``ahead_ms`` ahead: its file's
    ``baseTimeNanoseconds`` moved, every ``ts`` as written."""
    out = Path(tempfile.mkdtemp(prefix="oracle-clock-capture-"))
    for f in src.glob("*.json.gz"):
        if f.name.startswith(f"rank{rank}."):
            doc = orjson.loads(gzip.decompress(f.read_bytes()))
            doc["baseTimeNanoseconds"] += round(ahead_ms * 1e6)
            (out / f.name).write_bytes(gzip.compress(orjson.dumps(doc)))
        else:
            shutil.copy(f, out / f.name)
    return out


def _verdicts(a: Analysis) -> list[tuple[str, int | None, tuple[int, ...]]]:
    return sorted((f.category.value, f.step, f.ranks) for f in a.findings if f.severity == "major")


def test_a_real_capture_with_one_rank_on_a_clock_250_ms_behind() -> None:
    """The gloo capture whose rank 1 was made late in step 4: with rank 1's clock 250 ms behind, rank 1
    seems to arrive first everywhere. Aligned, the verdicts are the capture's own and every step's wall
    is within the gloo ops' noise of its own (their ends spread by tens of µs)."""
    src = DATA / "gloo_straggler_rank"
    own = analyze(read_trace(src))
    moved = read_trace(_moved_capture(src, 1, -250.0))
    aligned = analyze(moved)
    assert aligned.clocks is not None
    assert abs(int(aligned.clocks.offset_ns[1]) + 250_000_000) < 1_000_000
    assert _verdicts(aligned) == _verdicts(own) and ("straggler_rank", 4, (1,)) in _verdicts(own)
    walls = {(r.step, r.rank): r.wall_ns for r in own.steps}
    assert all(abs(r.wall_ns - walls[(r.step, r.rank)]) < 1_000_000 for r in aligned.steps)
    assert _verdicts(analyze(moved, align_clocks=False)) != _verdicts(own)


@pytest.mark.parametrize("folder", [*REAL_FOLDERS, *sorted(p for p in DATA.glob("gloo_*") if p.is_dir()),
                                    DATA / "ddp_finalize_wait", DATA / "pipeline_eager_send"],
                         ids=lambda p: p.name)
def test_ranks_recorded_on_one_host_keep_their_clock(folder: Path) -> None:
    a = real_case(folder) if folder in REAL_FOLDERS else analyze(read_trace(folder))
    if a is None:
        pytest.skip(f"{folder.name}: not a trace the reader takes whole")
    assert all(i.clock_offset_ns == 0 for i in a.graph.trace.ranks)
    assert a.clocks is None or not a.clocks.any()


def test_a_sampled_world_keeps_its_clocks() -> None:
    """HTA's sampled pair (ranks 0 and 1 of 128): SendRecv pairs that end up to 134 ms apart say nothing
    about the clocks, and the all-reduces agree."""
    a = analyze(read_trace(REAL / "hta" / "trace_filter", partial=True))
    assert not a.clocks.any()
