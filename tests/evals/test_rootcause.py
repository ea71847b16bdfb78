"""The root-cause suite: a scorer that counts only a fully right answer, its metrics, the two
baselines, and the real offline agent over real cases with a real FalkorDB."""

from __future__ import annotations

from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.evals.rootcause import Claim, blind_claim, run_rootcause, score, score_claims
from bottleneck_oracle.evals.types import Case, Expect

SYNC = Expect("host_sync", 3, (1,), ("aten::item", "cudaStreamSynchronize"))
EVERY_RANK = Expect("exposed_communication", 3, (), ("nccl:all_reduce",))
CLEAN = Expect("none", 3)
RIGHT = Claim("host_sync", 3, (1,), ("cudaStreamSynchronize",), "rank 1 blocks in cudaStreamSynchronize")


def test_score_counts_an_answer_right_in_every_part() -> None:
    assert score(SYNC, RIGHT) == {"correct": True, "category": True, "step": True, "rank": True, "op": True,
                                  "top3": True, "wrong": []}
    # the culprit op may be named in the text only
    assert score(SYNC, Claim("host_sync", 3, (0, 1), (), "the .item() call aten::item blocks"))["correct"]


@pytest.mark.parametrize(("claim", "wrong"), [
    (Claim("host_sync", 4, (1,), ("cudaStreamSynchronize",)), ["step"]),
    (Claim("host_sync", 3, (0,), ("cudaStreamSynchronize",)), ["rank"]),
    (Claim("host_sync", 3, (1,), ("aten::mm",), "the GEMMs are slow"), ["op"]),
    (Claim("host_pause", 3, (1,), ("cudaStreamSynchronize",)), ["category"]),
    (Claim("host_sync", None), ["step", "rank", "op"]),
])
def test_score_refuses_the_right_category_with_a_wrong_part(claim: Claim, wrong: list[str]) -> None:
    verdict = score(SYNC, claim)
    assert not verdict["correct"] and verdict["wrong"] == wrong


def test_score_needs_no_rank_for_a_cause_on_every_rank_and_no_cause_on_a_clean_case() -> None:
    assert score(EVERY_RANK, Claim("exposed_communication", 3, (0,), ("nccl:all_reduce",)))["correct"]
    assert score(CLEAN, Claim("none", 3))["correct"]
    assert score(CLEAN, Claim("none", None))["correct"]
    assert score(CLEAN, RIGHT)["wrong"] == ["category"]


def test_score_top3_reads_the_claims_next_categories() -> None:
    claim = Claim("host_pause", 3, (1,), ("x",), top=("host_pause", "straggler_rank", "host_sync", "slow_compute"))
    assert score(SYNC, claim)["top3"] and not score(SYNC, claim)["correct"]
    assert not score(Expect("slow_compute", 3, (), ("x",)), claim)["top3"]


def test_score_claims_reports_precision_and_false_positives() -> None:
    rows = [(SYNC, RIGHT), (SYNC, Claim("host_sync", 4, (1,), ("aten::item",))), (EVERY_RANK, Claim("none", None)),
            (CLEAN, Claim("none", 3)), (CLEAN, RIGHT)]
    m = score_claims(rows)
    assert m["top1_accuracy"] == 0.4  # the right answer and one clean one
    assert m["precision"] == pytest.approx(1 / 3, abs=1e-4)  # 3 causes claimed, 1 right
    assert m["false_positive_rate"] == 0.5 and m["localization"] == pytest.approx(1 / 3, abs=1e-4)
    assert m["op_recall"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["per_category"] == {"exposed_communication": 0.0, "host_sync": 0.5, "none": 0.5}
    assert m["n_questions"] == 5


def test_blind_claim_takes_the_commonest_category_and_the_highest_step(tmp_path: Path) -> None:
    cases = [Case("a", tmp_path, ("Why is step 3 slow?",), SYNC), Case("b", tmp_path, ("Why is step 7 slow?",), SYNC),
             Case("c", tmp_path, ("Why is step 2 slow?",), CLEAN)]
    assert blind_claim(cases) == Claim("host_sync", 7, top=("host_sync", "none"))


def _subset(cases: dict[str, Case]) -> list[Case]:
    return [cases[k] for k in ("synth_host_sync", "clean_s0", "gpt_2rank")]


def test_run_rootcause_offline_on_a_subset_is_right_and_above_its_floor(default_cases: dict[str, Case],
                                                                       eval_settings: Settings) -> None:
    ticks: list[tuple[int, int]] = []
    cases = _subset(default_cases)
    result = run_rootcause(cases, eval_settings, progress=lambda d, n: ticks.append((d, n)))
    m = result.metrics
    assert (m["top1_accuracy"], m["false_positive_rate"], m["precision"]) == (1.0, 0.0, 1.0), result.to_json()
    assert m["groundedness"] == 1.0 and m["answered"] == 1.0 and m["n_cases"] == 3
    blind = m["baselines"]["blind_floor"]
    assert blind["top1_accuracy"] < m["top1_accuracy"] and blind["answer"]["step"] == 5
    assert m["baselines"]["findings_only"]["n_questions"] == m["n_questions"]
    assert ticks[-1] == (m["n_questions"], m["n_questions"])
    row = next(r for r in result.cases if r.case == "synth_host_sync")
    assert row.passed and row.details["wrong"] == [] and row.details["got"]["category"] == "host_sync"
    q = row.details["questions"][0]
    assert q["seconds"] > 0 and [c["name"] for c in q["tool_calls"]][0] == "explain_step"
    assert q["top"][0] == "host_sync" and row.details["findings_only"]["correct"]


@pytest.mark.slow  # about 90 s on 2 cores: every question of the default set
def test_run_rootcause_offline_on_the_default_set(default_cases: dict[str, Case], eval_settings: Settings) -> None:
    result = run_rootcause(list(default_cases.values()), eval_settings)
    m = result.metrics
    misses = [(r.case, r.details["question"], r.details["got"], r.details["wrong"]) for r in result.cases
              if not r.passed]
    assert m["false_positive_rate"] == 0.0 and misses == []
    assert m["top1_accuracy"] >= 0.95 and m["groundedness"] == 1.0
    assert m["top1_accuracy"] > m["baselines"]["blind_floor"]["top1_accuracy"]
