"""The scan: a job read one rank at a time gives analyze's numbers (steps, walls, slow steps, arrivals at every
collective, stragglers, every finding with the slow steps' causes, the GPU-bound steps, the GPU timeline, the clocks) on every real, public and captured multi-rank folder and
on synthetic jobs whose clocks disagree, locally and on Ray, with a worker killed; and the driver holds
summaries, not events."""

from __future__ import annotations

import gzip
import pickle
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.job import job_paths
from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.graph.collectives import collective_arrivals
from bottleneck_oracle.findings.detectors import stragglers
from bottleneck_oracle.findings.findings import strongest
from bottleneck_oracle.findings.gpu_bound import gpu_bound_steps
from bottleneck_oracle.job.scan import Scan, scan
from bottleneck_oracle.findings.severity import bound_findings
from bottleneck_oracle.replay.engine import replay, weights_with
from bottleneck_oracle.errors import ConfigError, TraceFormatError
from bottleneck_oracle.executor import LocalExecutor, RayExecutor
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import parse_edit
from bottleneck_oracle.truth.injection import parse_injection
from bottleneck_oracle.replay.compile import compile_edits
from tests.conftest import DATA, REAL, REPO, one_ray_task_killed
from tests.test_executor import multi_rank_folders

EXAMPLE = REPO / "examples" / "gpt_2rank"


@cache
def _job(name: str) -> Path:
    """Synthetic jobs: 16 ranks on two hosts whose clocks disagree by 3 ms (data parallel across them, and
    pipeline stages across them), and a pipeline whose rank 5 paused 150 ms in step 3."""
    configs = {
        "skewed": SynthConfig(model="tiny", dp=4, tp=4, steps=4, seed=3, clock_skew_ms=3.0),
        "skewed_pipeline": SynthConfig(model="tiny", dp=2, tp=4, pp=2, microbatches=2, steps=4, seed=3,
                                       clock_skew_ms=3.0),
        "paused_pipeline": SynthConfig(model="tiny", dp=2, tp=4, pp=2, microbatches=2, steps=5, seed=4,
                                       injections=(parse_injection("host_pause@3:5=150ms"),)),
    }
    out = Path(tempfile.mkdtemp(prefix=f"oracle-scan-{name}-"))
    synthesize(out, configs[name], workers=1)
    return out


def _job_replay(a: Analysis, text: str) -> dict[tuple[int, int], int] | None:
    """Every (step, rank)'s wall under the edit, from the job's whole graph (None: it picks nothing here)."""
    try:
        c = compile_edits(a, [parse_edit(text)], a.steps[0].step)
    except ConfigError:
        return None
    r = replay(a, [], weight=weights_with(a.points, c.speedup, c.edge_scale, c.cut))
    return dict(zip(zip(r.step.tolist(), r.rank.tolist()), r.after_ns.tolist()))


def _paths(steps) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    """Each step's breakdown and critical path, segment by segment."""
    return [(r.step, r.rank, r.breakdown_ns, *(getattr(r, f).tolist() for f in (
        "path_node", "path_category", "path_rank", "path_start_ns", "path_dur_ns"))) for r in steps]


def _analysis_view(a: Analysis) -> dict[str, object]:
    """What a scan must equal, read from the whole job's analysis."""
    complete = [r for r in a.steps if (r.step, r.rank) not in a.partial_steps]
    best = strongest(bound_findings(stragglers(a.graph, complete, {s.step for s in a.slow_steps}), complete))
    rows = a.graph.steps.row_of()
    return {
        "steps": [(r.step, r.rank, r.start_ns, r.end_ns) for r in a.steps], "paths": _paths(a.steps),
        "partial": a.partial_steps,
        "slow": a.slow_steps, "arrivals": collective_arrivals(a.graph),
        "stragglers": sorted(((f.step, f.ranks, f.ops, f.impact_ms, f.severity, f.waiting, f.evidence) for f in best), key=str),
        "gpu": {key: a.gpu.record(i) for key, i in rows.items()},
        "gpu_trace": [(int(a.gpu_trace.rank[i]), a.gpu_trace.record(i)) for i in range(len(a.gpu_trace))],
        "clocks": a.clocks.offset_ns.tolist() if a.clocks is not None else None,
        "collectives": (a.graph.collectives.kind, a.graph.collectives.reliable.tolist()),
        "findings": list(a.findings),
        "gpu_bound": gpu_bound_steps(a.graph, a.gpu, [(r.step, r.rank) for r in complete]),
    }


def _scan_view(s: Scan) -> dict[str, object]:
    return {
        "steps": [(r.step, r.rank, r.start_ns, r.end_ns) for r in s.steps], "paths": _paths(s.steps),
        "partial": s.partial_steps,
        "slow": s.slow_steps, "arrivals": list(s.arrivals),
        "stragglers": sorted(((f.step, f.ranks, f.ops, f.impact_ms, f.severity, f.waiting, f.evidence) for f in s.stragglers), key=str),
        "gpu": {key: s.gpu.record(i) for i, key in enumerate(s.gpu_steps)},
        "gpu_trace": [(int(s.gpu_trace.rank[i]), s.gpu_trace.record(i)) for i in range(len(s.gpu_trace))],
        "clocks": s.clocks.offset_ns.tolist() if s.clocks is not None else None,
        "collectives": (s.collectives.kind, s.collectives.reliable.tolist()),
        "findings": list(s.findings), "gpu_bound": list(s.gpu_bound),
    }


def _assert_same(a: Analysis, s: Scan) -> None:
    want, got = _analysis_view(a), _scan_view(s)
    for key in want:
        assert got[key] == want[key], key


@pytest.mark.parametrize("folder", multi_rank_folders(), ids=lambda p: str(p.relative_to(p.parents[1])))
def test_a_scan_gives_analyze_s_numbers_on_every_multi_rank_folder(folder: Path) -> None:
    try:
        trace = read_trace(folder, partial=True)
    except TraceFormatError as e:  # not one job: the scan refuses it in the same words
        with pytest.raises(TraceFormatError, match=str(e).split(":")[0]):
            scan([folder], LocalExecutor(1), partial=True)
        return
    s = scan([folder], LocalExecutor(1), partial=True)
    assert s.ranks == tuple(i.rank for i in trace.ranks if i.events)
    _assert_same(analyze(trace), s)


@pytest.mark.parametrize("name", ["skewed", "skewed_pipeline", "paused_pipeline"])
def test_a_scan_gives_analyze_s_numbers_on_jobs_whose_clocks_disagree(name: str) -> None:
    """The members are read again on the one clock: the collectives across hosts are whole again."""
    a, s = analyze(read_trace(_job(name))), scan([_job(name)], LocalExecutor(2))
    _assert_same(a, s)
    if name.startswith("skewed"):
        assert s.clocks is not None and s.clocks.offset_ns.tolist() == [0] * 8 + [3_000_000] * 8
    else:  # the paused rank is the one straggler of its step, on the scan as on the analysis
        assert [(f.step, f.ranks) for f in s.stragglers] == [(3, (5,))]


def test_a_scan_takes_the_steps_analyze_takes_from_user_annotations() -> None:
    a = analyze(read_trace(EXAMPLE), steps_from="Optimizer.step")
    s = scan([EXAMPLE], LocalExecutor(1), steps_from="Optimizer.step")
    assert len(s.steps) == 12 and {r.step for r in s.steps} == set(range(6))
    _assert_same(a, s)


def test_the_driver_holds_each_rank_s_summary_not_its_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank's summary is its members and the chains its critical paths can take: a part of its points."""
    folder = _job("paused_pipeline")
    kept: list[tuple[int, int]] = []
    mark_back = job_paths._kernels.mark_back

    def counted(pred: np.ndarray, src: np.ndarray, sinks: np.ndarray) -> np.ndarray:
        out = mark_back(pred, src, sinks)
        kept.append((int(out.sum()), len(out)))
        return out
    monkeypatch.setattr(job_paths._kernels, "mark_back", counted)
    s = scan([folder], LocalExecutor(1))
    trace = read_trace(folder)
    per_rank = len(pickle.dumps(trace)) / len(trace.ranks)
    assert len(s.summary_bytes) == 16 and max(s.summary_bytes) < per_rank / 2, (s.summary_bytes, per_rank)
    assert len(kept) == 16 and sum(k for k, _ in kept) < 2 / 3 * sum(n for _, n in kept), kept


def test_a_scan_without_critical_paths_holds_the_members_only() -> None:
    """``--no-paths``: the same windows, slow steps and stragglers from summaries a fifth the size or less."""
    folder = _job("paused_pipeline")
    full, lean = scan([folder], LocalExecutor(1)), scan([folder], LocalExecutor(1), critical_paths=False)
    assert [(r.step, r.rank, r.start_ns, r.end_ns) for r in lean.steps] == \
        [(r.step, r.rank, r.start_ns, r.end_ns) for r in full.steps]
    assert lean.slow_steps == full.slow_steps and [f.ranks for f in lean.stragglers] == [f.ranks for f in full.stragglers]
    assert all(not r.breakdown_ns and not len(r.path_node) for r in lean.steps)
    assert all(r.breakdown_ns for r in full.steps)
    assert sum(lean.summary_bytes) * 5 < sum(full.summary_bytes)


@pytest.mark.parametrize("folder", ["gloo_checkpoint_stall", "skewed"])
def test_each_rank_file_is_parsed_once_through_every_round(folder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds run again (on settled ends, on moved clocks) and the findings' round read the trace the node kept."""
    from bottleneck_oracle.job import scan as scan_module
    from bottleneck_oracle.job import scan_rounds

    path = DATA / folder if (DATA / folder).exists() else _job(folder)
    reads: dict[Path, int] = {}
    rounds: list[str] = []
    read, summaries = scan_rounds.read_rank, scan_module._summaries

    def counted(p: Path, named: bool):  # type: ignore[no-untyped-def]
        reads[p] = reads.get(p, 0) + 1
        return read(p, named)

    def noted(*args, **kwargs):  # type: ignore[no-untyped-def]
        rounds.append(args[5])
        return summaries(*args, **kwargs)

    monkeypatch.setattr(scan_rounds, "read_rank", counted)
    monkeypatch.setattr(scan_module, "_summaries", noted)
    s = scan([path], LocalExecutor(1))  # one worker: the tasks run here
    assert len(rounds) == 2 and s.findings is not None  # round 2, then once again
    assert len(reads) >= len(s.ranks) and set(reads.values()) == {1}  # every file (a manifest too) read once


def test_a_node_whose_temporary_folder_takes_nothing_reads_each_rank_again(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A full or unwritable temporary folder costs a second read, not the scan."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    s = scan([EXAMPLE], LocalExecutor(1))
    assert _scan_view(s) == _scan_view(scan([EXAMPLE], LocalExecutor(2)))
    assert blocked.read_text() == "not a folder"


def test_a_scan_leaves_no_temporary_file_even_when_a_rank_file_is_bad(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # the scan's own, apart from other tests'
    s = scan([EXAMPLE], LocalExecutor(2))
    assert len(s.ranks) == 2 and not any(temp.iterdir())
    job = tmp_path / "job"
    job.mkdir()
    for f in EXAMPLE.iterdir():
        (job / f.name).write_bytes(f.read_bytes())
    victim = sorted(job.glob("*.json.gz"))[-1]
    raw = gzip.decompress(victim.read_bytes()) if victim.name.endswith(".gz") else victim.read_bytes()
    victim.write_bytes(gzip.compress(raw[: len(raw) // 2]))  # truncated JSON inside a good gzip
    with pytest.raises(TraceFormatError, match=f"{victim.name}: truncated JSON"):
        scan([job], LocalExecutor(2))
    assert not any(temp.iterdir())


def test_a_missing_rank_is_refused_unless_partial(tmp_path: Path) -> None:
    folder = _job("skewed")
    for f in sorted(folder.glob("*.json*"))[:-3]:
        (tmp_path / f.name).symlink_to(f)
    with pytest.raises(TraceFormatError, match=r"world size 16 but rank\(s\) .* are missing"):
        scan([tmp_path], LocalExecutor(1))
    assert len(scan([tmp_path], LocalExecutor(1), partial=True).ranks) < 16


# ---- on a local Ray cluster of two worker processes (serial: it starts processes of its own) ----


@pytest.mark.slow
@pytest.mark.parametrize("folder", [REPO / "examples" / "gpt_2rank", DATA / "gloo_slow_rank_loaded",
                                    REAL / "param" / "dlrm_8rank_kineto"], ids=lambda p: p.name)
def test_a_scan_on_ray_is_the_local_one(ray_cluster, folder: Path) -> None:  # type: ignore[no-untyped-def]
    local, ray = scan([folder], LocalExecutor(1)), scan([folder], RayExecutor())
    assert _scan_view(ray) == _scan_view(local)


@pytest.mark.slow
def test_a_64_rank_scan_on_ray_with_a_worker_killed_is_the_analysis_and_its_replay(ray_cluster, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("scan64")
    synthesize(out, SynthConfig(model="7b", dp=8, tp=4, pp=2, microbatches=2, steps=2), workers=2)
    executor = RayExecutor()
    with one_ray_task_killed(after_s=0.05) as killed:
        s = scan([out], executor, edits=[parse_edit("scale op=allreduce x2")])
    assert killed, "no worker was caught running a task"
    assert len(s.ranks) == 64
    a = analyze(read_trace(out, executor=LocalExecutor(2)))
    _assert_same(a, s)
    assert s.whatif is not None and s.whatif.after_ns == _job_replay(a, "scale op=allreduce x2")  # and the what-if
    assert np.median(s.summary_bytes) < 200_000
