"""The default case set: one injected fault of every category the analysis can name, clean jobs of
three seeds and the shipped real capture, each with a truth the traces bear out."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.evals.make_cases import LEFT_OUT, STEP
from bottleneck_oracle.evals.types import Case
from bottleneck_oracle.findings.finding import MAJOR
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.vocabulary import Bottleneck

FAULTS = sorted(b.value for b in Bottleneck if b is not Bottleneck.NONE and b.value not in LEFT_OUT)


def _trace_names(folder: Path) -> set[str]:
    names = set()
    for path in folder.glob("rank*.pt.trace.json.gz"):
        names |= {e.get("name", "") for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]}
    return names


def test_make_cases_makes_every_category_clean_seeds_and_the_real_capture(default_cases: dict[str, Case]) -> None:
    assert sorted(default_cases) == sorted([f"synth_{c}" for c in FAULTS] + ["clean_s0", "clean_s1", "clean_s2",
                                                                             "gpt_2rank", "synth_dataloader_stall_every_rank"])
    every = default_cases["synth_dataloader_stall_every_rank"].expect
    assert (every.category, every.ranks, [e.edit for e in every.edits]) == ("dataloader_stall", (), ["fix dataloader_stall"])
    assert LEFT_OUT.keys() == {"straggler_rank"}
    assert {c.expect.category for c in default_cases.values()} == {*FAULTS, "none"}
    real = default_cases["gpt_2rank"]
    assert (real.kind, real.expect.category, real.expect.step, real.expect.ranks) == ("real", "host_pause", 5, (1,))
    for case in default_cases.values():
        assert case.questions[0] == f"Why is step {case.expect.step} slow?"
        assert set(case.expect.ops) <= _trace_names(case.trace), case.id  # the culprits are ops of the trace


@pytest.mark.parametrize("category", FAULTS)
def test_each_synth_case_is_what_the_analysis_finds_first(category: str, default_cases: dict[str, Case]) -> None:
    case = default_cases[f"synth_{category}"]
    a = analyze(read_trace(case.trace, workers=2))
    top = next(f for f in a.findings if f.severity == MAJOR)
    assert (top.category.value, top.step) == (category, STEP), a.findings[:3]
    assert not case.expect.ranks or set(case.expect.ranks) <= set(top.ranks), (case.expect.ranks, top.ranks)
    assert set(top.ops) & set(case.expect.ops), (top.ops, case.expect.ops)


@pytest.mark.parametrize("case_id", ["clean_s0", "clean_s1", "clean_s2"])
def test_clean_cases_have_no_slow_step_and_no_major_finding(case_id: str, default_cases: dict[str, Case]) -> None:
    a = analyze(read_trace(default_cases[case_id].trace, workers=2))
    assert list(a.slow_steps) == []
    assert [f for f in a.findings if f.severity == MAJOR] == []


def test_the_fix_of_each_fault_brings_its_step_back_to_the_others(default_cases: dict[str, Case]) -> None:
    for category in FAULTS:
        case = default_cases[f"synth_{category}"]
        fix = next(e for e in case.expect.edits if e.edit == f"fix {category}")
        walls: dict[int, float] = {}
        a = analyze(read_trace(case.trace, workers=2))
        for r in a.steps:
            walls[r.step] = max(walls.get(r.step, 0.0), r.wall_ns / 1e6)
        others = statistics.median(w for s, w in walls.items() if s != STEP)
        assert fix.step == STEP and fix.true_ms < walls[STEP], (category, fix, walls)
        assert fix.true_ms == pytest.approx(others, rel=0.1), (category, fix, walls)
    scaled = {e.edit for c in default_cases.values() for e in c.expect.edits if e.edit.startswith("scale")}
    assert scaled == {"scale op=allreduce x2", "scale op=gemm x2"}
