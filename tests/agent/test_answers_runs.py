"""The answer to two runs compared, from a ``compare_runs`` result: the verdict with its interval first, then the
cause (with the what-if that checks it), what moved, other findings, comparability, what bounds each run;
every number one the tool gave."""

from __future__ import annotations

import json
from typing import Any

from bottleneck_oracle.agent.answers_describe import describe
from bottleneck_oracle.agent.answers_runs import compare_runs_reply
from bottleneck_oracle.agent.grounding import contract_problems, ungrounded
from bottleneck_oracle.agent.planner import Result

STALL = {"category": "dataloader_stall", "ranks": [0], "change": "appeared", "base_ms": 0.0, "new_ms": 15.25,
         "delta_ms": 15.25}
PAUSE = {"category": "host_pause", "ranks": [1], "change": "went away", "base_ms": 2.5, "new_ms": 0.0,
         "delta_ms": -2.5}
CAUSE = {"category": "data_loading", "base_ms": 0.5, "new_ms": 15.5, "delta_ms": 15.0, "finding": "dataloader_stall",
         "change": "appeared", "ranks": [0], "finding_base_ms": 0.0, "finding_new_ms": 15.25,
         "words": "data loading rose from 0.5 to 15.5 ms a step: the dataloader_stall finding on rank(s) 0 appeared"}
RUNS: dict[str, Any] = {
    "base": "a", "new": "b", "verdict": "slower", "headline": "NEW is slower: 15.5 ms (38.8%) per steady step, 95% "
    "interval +30.2% to +45.5%, confidence 100%", "delta_ms": 15.5, "delta_pct": 38.75, "interval_pct": [30.25, 45.5],
    "confidence": 0.995, "confidence_pct": 100, "base_median_ms": 40.0, "new_median_ms": 55.5,
    "comparability": {"level": "medium", "reasons": ["few steady steps (2 and 2): the confidence is weak"]},
    "cause": CAUSE,
    "moved": {"categories": [{"category": "data_loading", "base_ms": 0.5, "new_ms": 15.5, "delta_ms": 15.0}],
              "ops": [{"op": "enumerate(DataLoader)", "base_ms": 0.25, "new_ms": 15.25, "delta_ms": 15.0}],
              "findings": [STALL, PAUSE], "collectives": [], "ranks": []},
    "whatif": {"applied_to": "new", "predicts": "base", "edit": "fix dataloader_stall", "predicted_ms": 41.5,
               "target_ms": 40.0, "error_pct": 3.8},
    "base_verdict": {"verdict": "gpu-bound", "headline": "h", "gpu_busy_pct": 91.5, "cause": None,
                     "exposed_ms": None, "saving_ms": None},
    "new_verdict": {"verdict": "input-bound", "headline": "h", "gpu_busy_pct": 64.25, "cause": "input",
                    "exposed_ms": 15.5, "saving_ms": 14.75}}


def _text(c: dict[str, Any]) -> str:
    reply = compare_runs_reply(c)
    text = reply.render()
    assert ungrounded(text, [json.dumps(c)]) == [], text
    assert contract_problems(text) == [] and all(e.tool == "compare_runs" for e in reply.evidence)
    return text


def test_compare_runs_reply_gives_the_verdict_with_its_interval_then_the_cause() -> None:
    lines = _text(RUNS).splitlines()
    assert lines[0] == ("b is slower than a by 15.5 ms (+38.75%) per steady step, 95% interval +30.25% to +45.5%, "
                        "confidence 100%. Median step: 55.5 ms against 40.0 ms.")
    assert lines[1].startswith(f"- The cause: {CAUSE['words']}; fixing it in b (`fix dataloader_stall`) predicts "
                               "41.5 ms a step against 40.0 ms measured for a (+3.8% off).")
    assert lines[2].startswith("- What moved, ms per steady step: the critical path's data_loading +15.0 ms; "
                               "ops 'enumerate(DataLoader)' +15.0 ms.")
    # the cause's own finding is on the cause's line; the others have theirs
    assert lines[3] == "- Findings that moved: host_pause on rank(s) 1 went away (2.5 to 0.0 ms a step). [compare_runs]"
    assert lines[4].startswith("- Comparability medium: few steady steps (2 and 2)")
    assert lines[5] == ("- What bounds each run: b is input-bound (GPU busy 64.25%); a is gpu-bound (GPU busy 91.5%)."
                        " [compare_runs]")
    assert lines[-1] == "Check: oracle diff a b --format markdown"
    assert "What-if check" not in _text(RUNS)  # said once, with the cause


def test_compare_runs_reply_keeps_a_whatif_of_another_finding_on_its_own_line() -> None:
    other = RUNS | {"whatif": RUNS["whatif"] | {"edit": "fix host_pause"}}
    text = _text(other)
    assert "fixing it" not in text and "The cause: data loading rose" in text
    assert "What-if check: `fix host_pause` applied to b predicts 41.5 ms" in compare_runs_reply(other).render(True)


def test_compare_runs_reply_unchanged_names_no_cause_and_no_spread_says_so() -> None:
    same = RUNS | {"verdict": "unchanged", "delta_ms": 0.25, "delta_pct": 0.5, "interval_pct": [-1.5, 2.25],
                   "confidence_pct": 97, "cause": None, "whatif": None,
                   "moved": RUNS["moved"] | {"findings": []}}
    text = _text(same)
    assert text.splitlines()[0] == ("b is unchanged against a: 0.25 ms (+0.5%) per steady step, 95% interval -1.5% "
                                    "to +2.25%, confidence 97%, within the noise of their steps.")
    assert "The cause" not in text and "Findings that moved" not in text
    flat = same | {"confidence": None, "confidence_pct": None}
    assert "per steady step, no step spread to judge by, within the noise" in _text(flat)


def test_compare_runs_reply_the_faster_direction_and_a_run_without_gpu_work() -> None:
    back = RUNS | {"base": "b", "new": "a", "verdict": "faster", "delta_ms": -15.5, "delta_pct": -27.93,
                   "interval_pct": [-31.5, -21.25], "base_median_ms": 55.5, "new_median_ms": 40.0,
                   "cause": None, "whatif": RUNS["whatif"] | {"applied_to": "base", "predicts": "new"},
                   "base_verdict": RUNS["new_verdict"], "new_verdict": RUNS["base_verdict"] | {"gpu_busy_pct": None}}
    text = _text(back)
    assert text.startswith("a is faster than b by 15.5 ms (-27.93%) per steady step, 95% interval -31.5% to -21.25%")
    assert "a is gpu-bound (no GPU work); b is input-bound (GPU busy 64.25%)" in text
    assert "Findings that moved: dataloader_stall on rank(s) 0 appeared" in text  # no cause: every finding listed
    assert "What-if check: `fix dataloader_stall` applied to b predicts 41.5 ms" in text


def test_describe_hands_compare_runs_to_this_answer() -> None:
    reply = describe("compare_runs", [Result("compare_runs", {}, RUNS)])
    assert reply is not None and reply.render() == compare_runs_reply(RUNS).render()
