"""``oracle ask`` as a user runs it: a real process over the session's workspace (gpt_2rank loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_oracle


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "ORACLE_HOME": str(home)}


def test_ask_json_prints_the_documented_shape(agent_home: Path) -> None:
    out = run_oracle("ask", "Why is step 5 slow?", "--json", "--trace", "gpt_2rank", env=_env(agent_home))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {"answer", "answered", "step", "cause", "evidence", "suggestions", "tool_calls", "llm", "grounded",
            "ungrounded_numbers", "verdict", "action", "confidence", "check"} <= set(doc)
    assert doc["answer"].splitlines()[0] == doc["verdict"] and all(e["tool"] for e in doc["evidence"])
    assert doc["cause"] == {"category": "host_pause", "ranks": [1], "ops": doc["cause"]["ops"],
                            "impact_ms": doc["cause"]["impact_ms"]} and doc["cause"]["ops"]
    assert doc["llm"] == "offline" and doc["grounded"] is True and doc["suggestions"][0]["gain_ms"] > 100


def test_ask_streams_tool_progress_on_stderr_and_answers_on_stdout(agent_home: Path) -> None:
    out = run_oracle("ask", "which rank is the straggler?", "--trace", "gpt_2rank", env=_env(agent_home))
    assert out.returncode == 0 and "→ stragglers(" in out.stderr and "Rank 1 is the straggler" in out.stdout


def test_a_step_that_does_not_exist_exits_2_naming_the_steps(agent_home: Path) -> None:
    out = run_oracle("ask", "why is step 99 slow?", "--trace", "gpt_2rank", env=_env(agent_home))
    assert out.returncode == 2 and "step 99" in out.stdout and "2, 3, 4, 5, 6, 7" in out.stdout


def test_an_unknown_trace_exits_2_in_one_line(agent_home: Path) -> None:
    out = run_oracle("ask", "why is step 5 slow?", "--trace", "no-such-run", env=_env(agent_home))
    assert out.returncode == 2 and "no-such-run" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_an_empty_workspace_says_how_to_load_a_trace(tmp_path: Path) -> None:
    out = run_oracle("ask", "why is step 5 slow?", env=_env(tmp_path))
    assert out.returncode == 2 and "oracle ingest" in out.stderr
    from bottleneck_oracle.graphdb import stop_server

    stop_server(tmp_path)


def _chat(home: Path, lines: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bottleneck_oracle", "chat", *args], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=300, env=_env(home))


def test_chat_answers_in_turn_switches_trace_and_resumes_a_session(agent_home: Path) -> None:
    first = _chat(agent_home, ["which rank is the straggler in step 5?", "/trace no-such-run", "why is step 5 slow?",
                               "/trace gpt_2rank", "/bogus", "/quit"], "--session", "cli-chat", "--trace", "gpt_2rank")
    assert first.returncode == 0, first.stderr
    assert "Rank 1 is the straggler" in first.stdout and "→ stragglers(" in first.stderr
    assert "no-such-run" in first.stdout + first.stderr  # a bad trace ends that answer, not the chat
    assert "unknown command /bogus" in first.stderr
    again = _chat(agent_home, ["/history", "/quit"], "--session", "cli-chat")
    assert again.returncode == 0 and "2 earlier question(s)" in again.stderr
    assert "which rank is the straggler in step 5?" in again.stderr


def test_ask_session_continues_the_conversation_across_processes(agent_home: Path) -> None:
    def ask(question: str) -> dict:
        out = run_oracle("ask", question, "--json", "--session", "cli-follow-ups", "--trace", "gpt_2rank",
                         env=_env(agent_home))
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    why, do, save = ask("Why is step 5 slow?"), ask("What should I do about it?"), ask("How much would that save?")
    assert why["cause"]["category"] == "host_pause" and why["verdict"].startswith("Step 5 is slow")
    assert [(c["name"], c["args"]) for c in do["tool_calls"]] == [("optimize", {"step": 5, "budget": 1})]
    assert do["suggestions"][0]["edit"].startswith("fix host_pause") and do["action"] and do["check"]
    assert [(c["name"], c["args"]) for c in save["tool_calls"]] == [("whatif", {"edit": "fix host_pause", "step": 5})]
    assert save["suggestions"][0]["gain_ms"] == do["suggestions"][0]["gain_ms"] == why["suggestions"][0]["gain_ms"]
    assert all(d["grounded"] for d in (why, do, save))


def test_ask_default_fits_a_screen_and_verbose_prints_what_the_tools_returned(agent_home: Path) -> None:
    short = run_oracle("ask", "Why is step 5 slow?", "--trace", "gpt_2rank", env=_env(agent_home))
    full = run_oracle("ask", "Why is step 5 slow?", "--trace", "gpt_2rank", "--verbose", env=_env(agent_home))
    lines = short.stdout.strip().splitlines()
    assert short.returncode == full.returncode == 0 and len(lines) <= 8
    assert lines[0].startswith("Step 5 is slow because") and lines[-2].startswith("Do: ")
    assert lines[-1].startswith("Check: oracle whatif gpt_2rank --edit 'fix host_pause' --step 5")
    assert "explain_step({'step': 5}) returned: {" in full.stdout and "offline planner" in full.stdout


def test_ask_about_a_hang_answers_from_the_dumps_alone(tmp_path: Path) -> None:
    from tests.conftest import DATA

    dumps = DATA / "hangs" / "sleep_profiled"
    out = run_oracle("ask", "why did my job hang?", "--dumps", dumps, "--json", env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tool_calls"][0]["name"] == "hang_report" and doc["grounded"] is True
    assert doc["verdict"].startswith("Rank 1 holds up the job: it never entered all_reduce #6 of group 0")
    assert doc["confidence"].startswith("high") and doc["check"] == f"oracle hang {dumps}"
    assert not (tmp_path / "falkordb").exists()  # a question about dumps starts no graph database
    asked = run_oracle("ask", "which rank is stuck?", env=_env(tmp_path))  # no --dumps: says what to pass
    assert asked.returncode == 2 and "--dumps" in asked.stdout + asked.stderr


def test_ask_about_a_pipeline_job_answers_from_its_op_table_alone(tmp_path: Path) -> None:
    from tests.conftest import STRAGGLERS

    job = STRAGGLERS / "AR"
    question = "which workers hold this job back, and how much faster would it be without them?"
    out = run_oracle("ask", question, "--pipeline", job, "--json", env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tool_calls"][0]["name"] == "straggler_report" and doc["grounded"] is True
    assert doc["verdict"].startswith("One slow worker holds the job back: rank 0 (dp_rank 0, stage 0)")
    assert "S = 1.973" in doc["verdict"] and doc["action"].startswith("replace or drain rank 0 (dp_rank 0, stage 0)")
    assert doc["check"] == f"oracle stragglers {job} --whatif 'fix straggler_rank rank=0'"
    split = run_oracle("ask", "is it one bad node or the pipeline split?", "--pipeline", STRAGGLERS / "ST",
                       env=_env(tmp_path))
    assert split.returncode == 0, split.stderr
    assert split.stdout.startswith("The pipeline split, not a bad node: stage 3's share of the gap is 1.22")
    assert "S = 1.179" in split.stdout.splitlines()[0] and "Do: move layers off stage 3" in split.stdout
    unknown = run_oracle("ask", "what if rank 37 were healthy?", "--pipeline", STRAGGLERS / "ST", env=_env(tmp_path))
    assert unknown.returncode == 2 and "rank 37 records no ops" in unknown.stdout
    assert "the table's workers are ranks 0, 1, 2, 3, 4, 5, 6, 7" in unknown.stdout
    assert not (tmp_path / "falkordb").exists()  # a question about an op table starts no graph database
    asked = run_oracle("ask", "is the pipeline unbalanced?", env=_env(tmp_path))  # no --pipeline: says what to pass
    assert asked.returncode == 2 and "--pipeline" in asked.stdout + asked.stderr
    assert not (tmp_path / "falkordb").exists()


def test_which_kernels_lists_gpu_kernels_by_readable_name(tmp_path: Path) -> None:
    wild = Path("/work/shared/traces/wild/tracelens/h100/falconsai_nsfw")
    out = run_oracle("ask", "which kernels take the most time?", "--trace", wild, env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("The GPU kernels of the run") and "sm90 gemm bf16 128x128x64" in out.stdout
    assert "<" not in out.stdout and "Host ops by critical-path time" in out.stdout
    from bottleneck_oracle.graphdb import stop_server

    stop_server(tmp_path)
