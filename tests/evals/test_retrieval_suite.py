"""The retrieval suite on a real synthetic job (a 40 ms data-loader stall on rank 1 in step 2) loaded
into a real embedded FalkorDB: the condensed critical subgraph of the step must name the stalled op."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.retrieval_suite import context_ops, run_retrieval
from bottleneck_oracle.evals.types import Case, Expect
from bottleneck_oracle.workspace.ingest import ingest
from tests.agent.cases import workspace
from tests.evals.conftest import stalled_job

STEP = 2
NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"  # the op the stall lengthens


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with workspace(tmp_path_factory.mktemp("retrieval_suite_home")) as s:
        yield s


@pytest.fixture(scope="module")
def stalled(tmp_path_factory: pytest.TempPathFactory, settings: Settings) -> Path:
    """The job, ingested ahead without the graph model's predictions and the finding memory (neither is
    in the context; together they are most of a first load's 30 s on 2 cores): the suite finds it loaded."""
    folder = stalled_job(tmp_path_factory.mktemp("retrieval_suite") / "stall")
    ingest([folder], settings, predict=False, memory=False)
    return folder


def test_run_retrieval_finds_the_stalled_op(stalled: Path, settings: Settings) -> None:
    cases = [
        Case("stall", stalled, (), Expect("dataloader_stall", STEP, (1,), (NEXT, "aten::not_in_the_trace"))),
        # the same step with culprits the trace does not hold: retrieval cannot be credited for them
        Case("invented", stalled, (), Expect("dataloader_stall", STEP, (1,), ("aten::not_in_the_trace",))),
        Case("clean", stalled, (), Expect("none", STEP)),
    ]
    result = run_retrieval(cases, settings)
    stall, invented = result.cases
    assert stall.passed and stall.details["found"] == [NEXT], stall.details
    assert (stall.details["step"], stall.details["rank"]) == (STEP, 1)
    assert 0 < stall.details["tokens"] <= 1500 and stall.details["within_budget"]
    assert not invented.passed and invented.details["found"] == [] and "why" in invented.details
    m = result.metrics
    assert (m["culprit_recall"], m["within_budget"], m["n"], m["skipped_clean"]) == (0.5, 1.0, 2, 1)
    assert m["tokens_max"] == stall.details["tokens"] <= 1500


def test_run_retrieval_tight_budget_is_reported(stalled: Path, settings: Settings) -> None:
    case = Case("stall", stalled, (), Expect("dataloader_stall", STEP, (), (NEXT,)))  # rank: the step's slowest
    (row,) = run_retrieval([case], settings, budget_tokens=40).cases
    assert row.details["tokens"] > 40 and not row.details["within_budget"] and not row.passed
    assert row.details["rank"] == 1  # the stalled rank is the slow one


def test_context_ops_reads_path_collectives_and_findings() -> None:
    ctx = {"path": [{"op_class": "gemm", "ops": [{"name": "aten::mm"}]}],
           "collectives": [{"op": "ncclAllReduce"}, {"op": None}], "findings": [{"ops": ["aten::item"]}]}
    assert context_ops(ctx) == {"aten::mm", "ncclAllReduce", "aten::item"}


@pytest.mark.slow  # a first load ingests with the graph model's predictions and the finding memory: ~30 s
def test_run_retrieval_ingests_a_trace_it_has_not_seen(tmp_path: Path) -> None:
    folder = stalled_job(tmp_path / "stall")
    with workspace(tmp_path / "home") as settings:
        result = run_retrieval([Case("stall", folder, (), Expect("dataloader_stall", STEP, (1,), (NEXT,)))], settings)
    assert result.metrics["culprit_recall"] == 1.0 and result.cases[0].passed
