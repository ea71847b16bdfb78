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

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.build import build_graph
from bottleneck_oracle.analysis.clocks import SKEW_MIN_NS, ClockEstimate, clock_offsets, moved_clocks
from bottleneck_oracle.analysis.health import HealthCode, trace_health
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA, REAL
from tests.analysis.real_cases import REAL_FOLDERS, real_case

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


@cache
def _pipeline(skew_ms: float) -> Path:
    """16 ranks, pipeline stage 0 on node 0 and stage 1 on node 1: the stages share no all-reduce, only
    their activation and gradient transfers (tp 4 x dp 2 x pp 2)."""
    out = Path(tempfile.mkdtemp(prefix="oracle-clocks-pp-"))
    synthesize(out, SynthConfig(model="tiny", dp=2, tp=4, pp=2, microbatches=2, steps=4, seed=3,
                                clock_skew_ms=skew_ms), workers=1)
    return out


def test_pipeline_stages_on_two_hosts_are_joined_through_their_transfers() -> None:
    """Node 1's clock 3 ms ahead and no collective across the nodes: the GPU transfers between the stages,
    impossible as recorded, join them; the analysis is the one-clock job's to the ns, and the note says how."""
    one_clock, skewed = analyze(read_trace(_pipeline(0.0))), analyze(read_trace(_pipeline(3.0)))
    assert skewed.clocks is not None and one_clock.clocks is not None
    assert skewed.clocks.offset_ns.tolist() == [0] * 8 + [3_000_000] * 8
    assert skewed.clocks.reference.tolist() == [0] * 16 and (skewed.clocks.transfers[8:] > 0).all()
    assert not one_clock.clocks.any()  # on one clock the transfers overlap as recorded: nothing is joined or moved
    assert _report(skewed) == _report(one_clock)
    (note,) = [n.message for n in trace_health(skewed) if n.code == HealthCode.CLOCK_SKEW]
    assert "ranks 8-15 share no all-reduce, all-gather or reduce-scatter with rank 0's and were joined through" in note


def test_left_skewed_a_pipeline_loses_its_transfers() -> None:
    """What joining the stages prevents: the transfers unmatched, and another verdict."""
    one_clock = analyze(read_trace(_pipeline(0.0)))
    skewed = analyze(read_trace(_pipeline(3.0)), align_clocks=False)
    assert skewed.graph.collectives.reliable.sum() < one_clock.graph.collectives.reliable.sum()
    assert _report(skewed) != _report(one_clock)


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


def test_a_group_nothing_joins_is_named_as_left_on_its_own_clock() -> None:
    """The note's last clause, for ranks 4-7 that share no collective with rank 0's and no transfer says
    otherwise (a gloo pipeline across hosts): rank 2 moved within rank 0's group, ranks 4-7 apart."""
    z = np.zeros(8, dtype=np.int64)
    c = ClockEstimate(offset_ns=np.array([0, 0, 120_000, 0, 0, 0, 0, 0]), reference=np.array([0] * 4 + [4] * 4),
                      evidence=np.full(8, 12), spread_ns=z, transfers=z)
    text = moved_clocks(c)
    assert text.startswith("against rank 0's clock, rank 2 read 0.120 ms ahead (each from 12+ shared collectives")
    assert text.endswith("ranks 4-7 share no all-reduce, all-gather or reduce-scatter with rank 0's, and no GPU "
                         "transfer that says otherwise: their clock against it is left as recorded")
