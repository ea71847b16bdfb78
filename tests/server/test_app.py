"""The HTTP API against a real server on 127.0.0.1 over a workspace with a real FalkorDB: the shipped
example uploaded, then every route on it, the chat's events, and the errors (a bad file, a file too
large, a trace or step that is not there, a bad edit, a missing token)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bottleneck_oracle import __version__
from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.analysis.report import analysis_to_dict
from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.server.app import UPLOADS
from bottleneck_oracle.traces import read_trace
from tests.conftest import DATA, STRAGGLERS
from tests.server.conftest import GPT, QWEN, UPLOAD_LIMIT_MB, serving, upload

ERROR_STATUSES = (400, 404, 413)


def _one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and detail and "\n" not in detail and "Traceback" not in detail
    return detail


def _events(response: httpx.Response) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a server-sent event stream."""
    out = []
    for block in response.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


def test_health_and_the_page(server: str) -> None:
    assert httpx.get(f"{server}/api/health").json() == {"status": "ok", "version": __version__}
    page = httpx.get(f"{server}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower() and page.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert "access-control-allow-origin" not in page.headers  # CORS closed


def test_upload_reads_analyses_and_ingests_the_example(server: str, uploaded: dict[str, Any],
                                                       server_settings: Settings) -> None:
    assert uploaded["name"] == "gpt_2rank" and uploaded["ranks"] == 2 and uploaded["steps"] == 12
    assert uploaded["status"] == "complete" and uploaded["id"]
    listed = httpx.get(f"{server}/api/traces").json()["traces"]
    assert [t for t in listed if t["id"] == uploaded["id"]] == [uploaded]
    saved = list((Path(server_settings.home) / UPLOADS).glob("*/gpt_2rank/*.json.gz"))
    assert sorted(p.name for p in saved) == ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]


def test_steps_marks_step_5_slow_on_both_ranks(server: str, uploaded: dict[str, Any]) -> None:
    body = httpx.get(f"{server}/api/traces/gpt_2rank/steps").json()
    assert body["trace"]["id"] == uploaded["id"] and body["slow"] == [5]
    rows = {(s["step"], s["rank"]): s for s in body["steps"]}
    assert set(rows) == {(s, r) for s in range(2, 8) for r in (0, 1)}
    assert rows[(5, 1)]["slow"] and rows[(5, 1)]["wall_ms"] == pytest.approx(179.484, abs=1e-3)
    assert rows[(5, 1)]["excess_ms"] > 140 and not rows[(3, 0)]["slow"]
    by_prefix = httpx.get(f"{server}/api/traces/{uploaded['id'][:6]}/steps").json()
    assert by_prefix["steps"] == body["steps"]


def test_explain_gives_the_cause_of_step_5(server: str, uploaded: dict[str, Any]) -> None:
    body = httpx.get(f"{server}/api/traces/{uploaded['id']}/steps/5").json()
    assert body["step"] == 5 and body["rank"] == 1 and body["slow"]
    assert body["cause"]["category"] == "host_pause" and body["cause"]["ranks"] == [1]
    assert sum(body["breakdown_ms"].values()) == pytest.approx(body["wall_ms"], abs=0.01)
    rank0 = httpx.get(f"{server}/api/traces/gpt_2rank/steps/5", params={"rank": 0}).json()
    assert rank0["rank"] == 0


def test_timeline_of_step_5(server: str, uploaded: dict[str, Any]) -> None:
    body = httpx.get(f"{server}/api/traces/gpt_2rank/steps/5/timeline").json()
    assert body["trace_id"] == uploaded["id"] and body["step"] == 5 and body["critical_rank"] == 1
    assert {lane["rank"] for lane in body["lanes"]} == {0, 1}
    critical = {e["id"] for e in body["events"] if e["critical"]}
    assert critical == set(body["critical_path"]) and critical
    one = httpx.get(f"{server}/api/traces/gpt_2rank/steps/5/timeline",
                    params=[("rank", 1), ("max_events", len(critical) + 5)]).json()
    assert {lane["rank"] for lane in one["lanes"]} == {1} and len(one["events"]) == len(critical) + 5
    assert one["dropped"] > 0


def test_findings_put_the_host_pause_first(server: str, uploaded: dict[str, Any]) -> None:
    first = httpx.get(f"{server}/api/traces/gpt_2rank/findings").json()["findings"][0]
    assert (first["category"], first["step"], first["ranks"]) == ("host_pause", 5, [1])
    assert first["summary"] and first["remedy"] and first["evidence"]


def test_whatif_predicts_and_gives_the_new_critical_path(server: str, uploaded: dict[str, Any]) -> None:
    body = httpx.post(f"{server}/api/traces/gpt_2rank/whatif", json={"edits": ["collective_faster:allreduce=2"]},
                      timeout=300).json()
    assert body["step"] == 5 and body["baseline_ms"] == pytest.approx(179.484, abs=1e-3)
    assert "replay" in body["predicted_ms"] and body["chosen"] in body["predicted_ms"] and body["why"]
    timeline = httpx.get(f"{server}/api/traces/gpt_2rank/steps/5/timeline").json()
    assert body["old_critical_path"] == timeline["critical_path"] and body["critical_path"]
    fixed = httpx.post(f"{server}/api/traces/gpt_2rank/whatif", json={"edits": ["fix host_pause"], "step": 5},
                       timeout=300).json()
    assert fixed["predicted_ms"]["replay"] < 40


def test_optimize_plans_the_fix_of_the_pause_first(server: str, uploaded: dict[str, Any]) -> None:
    body = httpx.post(f"{server}/api/traces/gpt_2rank/optimize", json={"budget": 2}, timeout=300).json()
    assert body["step"] == 5 and body["plan"] and body["plan"][0]["edit"].startswith("fix host_pause")
    assert body["plan"][0]["gain_ms"] > 100 and len(body["plan"]) <= 2


def test_ask_streams_the_tool_calls_then_the_answer(server: str, uploaded: dict[str, Any]) -> None:
    response = httpx.post(f"{server}/api/ask", json={"question": "Why is step 5 slow?", "trace": "gpt_2rank"},
                          timeout=300)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = _events(response)
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "answer" and kinds.count("tool") == kinds.count("tool_done") >= 1
    assert kinds.index("tool") < kinds.index("tool_done")
    assert ("tool", {"name": "explain_step", "args": {"step": 5}}) in events
    answer = events[-1][1]
    assert answer["answered"] and answer["grounded"] and answer["step"] == 5
    assert answer["cause"]["category"] == "host_pause" and answer["cause"]["ranks"] == [1]
    assert "179.484 ms" in answer["answer"] and "rank 1" in answer["answer"]


def _answer(server: str, question: str, session: str | None) -> dict[str, Any]:
    body = {"question": question, "trace": "gpt_2rank"} | ({"session": session} if session else {})
    events = _events(httpx.post(f"{server}/api/ask", json=body, timeout=300))
    assert events[-1][0] == "answer", events
    return events[-1][1]


def test_ask_keeps_one_conversation_per_client_session(server: str, uploaded: dict[str, Any]) -> None:
    why = _answer(server, "Why is step 5 slow?", "client-a")
    assert why["verdict"].startswith("Step 5 is slow because") and why["verdict"] == why["answer"].splitlines()[0]
    assert why["evidence"] and all(e["tool"] for e in why["evidence"]) and why["action"] and why["check"]
    save = _answer(server, "How much would that save?", "client-a")
    assert [(c["name"], c["args"]) for c in save["tool_calls"]] == [("whatif", {"edit": "fix host_pause", "step": 5})]
    assert save["suggestions"][0]["gain_ms"] == why["suggestions"][0]["gain_ms"]
    other = _answer(server, "How much would that save?", "client-b")  # another client's conversation is its own
    assert not other["answered"] and other["tool_calls"] == []
    bad = httpx.post(f"{server}/api/ask", json={"question": "why?", "session": "a b<script>"}, timeout=60)
    assert bad.status_code == 400 and "session" in bad.json()["detail"]


def test_ask_about_a_trace_that_is_not_there_is_404(server: str, uploaded: dict[str, Any]) -> None:
    detail = _one_line_error(httpx.post(f"{server}/api/ask", json={"question": "why?", "trace": "no-such-run"}), 404)
    assert "no-such-run" in detail and "gpt_2rank" in detail


@pytest.mark.parametrize(("content", "message"), [
    (b"hello, not json", "rank0.json: not valid JSON"),
    # mtime=0: the same bytes in every xdist worker, whose collections must match
    (gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', mtime=0), "rank0.json.gz:"),
], ids=["not-json", "truncated-gzip"])
def test_a_bad_file_is_400_with_the_readers_line_and_the_server_goes_on(server: str, server_settings: Settings,
                                                                        content: bytes, message: str) -> None:
    name = "rank0.json" if message.startswith("rank0.json:") else "rank0.json.gz"
    before = set((Path(server_settings.home) / UPLOADS).glob("*"))
    response = httpx.post(f"{server}/api/traces", files=[("files", (name, content, "application/json"))])
    detail = _one_line_error(response, 400)
    assert detail.startswith(message)
    assert set((Path(server_settings.home) / UPLOADS).glob("*")) == before  # nothing left behind
    assert httpx.get(f"{server}/api/health").status_code == 200


def test_an_upload_that_is_not_a_trace_file_is_400(server: str) -> None:
    bad_name = httpx.post(f"{server}/api/traces", files=[("files", ("../../etc/x.txt", b"{}", "text/plain"))])
    assert "x.txt" in _one_line_error(bad_name, 400)
    no_files = httpx.post(f"{server}/api/traces", data={"name": "empty"}, files=[("other", ("a.json", b"{}"))])
    assert "'other'" in _one_line_error(no_files, 400)
    not_multipart = httpx.post(f"{server}/api/traces", json={"files": []})
    assert "multipart" in _one_line_error(not_multipart, 400)


def test_an_upload_over_the_limit_is_413(server: str) -> None:
    big = [("files", ("rank0.json", b" " * (UPLOAD_LIMIT_MB * 2**20 + 1), "application/json"))]
    declared = httpx.post(f"{server}/api/traces", files=big)
    assert "over the limit" in _one_line_error(declared, 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while the body streams
        yield b'--b\r\nContent-Disposition: form-data; name="files"; filename="rank0.json"\r\n\r\n'
        for _ in range(UPLOAD_LIMIT_MB + 1):
            yield b" " * 2**20
        yield b"\r\n--b--\r\n"

    streamed = httpx.post(f"{server}/api/traces", content=chunks(),
                          headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert "over the limit" in _one_line_error(streamed, 413)
    assert httpx.get(f"{server}/api/health").status_code == 200


def test_an_unknown_trace_or_step_is_404_listing_what_there_is(server: str, uploaded: dict[str, Any]) -> None:
    trace = _one_line_error(httpx.get(f"{server}/api/traces/no-such-run/steps"), 404)
    assert "no-such-run" in trace and f"gpt_2rank ({uploaded['id']})" in trace
    for path in ("/steps/42", "/steps/42/timeline"):
        step = _one_line_error(httpx.get(f"{server}/api/traces/gpt_2rank{path}"), 404)
        assert "step 42" in step and "2, 3, 4, 5, 6, 7" in step
    whatif = httpx.post(f"{server}/api/traces/gpt_2rank/whatif", json={"edits": ["fix host_pause"], "step": 42})
    assert "2, 3, 4, 5, 6, 7" in _one_line_error(whatif, 404)
    rank = _one_line_error(httpx.get(f"{server}/api/traces/gpt_2rank/steps/5/timeline", params={"rank": 9}), 404)
    assert "rank 9" in rank and "0, 1" in rank
    assert "no-such-run" in _one_line_error(httpx.get(f"{server}/api/traces/no-such-run/findings"), 404)


def test_a_bad_edit_or_body_is_400(server: str, uploaded: dict[str, Any]) -> None:
    edit = _one_line_error(httpx.post(f"{server}/api/traces/gpt_2rank/whatif", json={"edits": ["bogus"]}), 400)
    assert "edit 'bogus'" in edit
    empty = _one_line_error(httpx.post(f"{server}/api/traces/gpt_2rank/whatif", json={"edits": []}), 400)
    assert empty.startswith("body.edits:")
    budget = _one_line_error(httpx.post(f"{server}/api/traces/gpt_2rank/optimize", json={"budget": 0}), 400)
    assert budget.startswith("body.budget:")
    step = _one_line_error(httpx.get(f"{server}/api/traces/gpt_2rank/steps/five"), 400)
    assert step.startswith("path.step:")
    llm = _one_line_error(httpx.post(f"{server}/api/ask", json={"question": "why?", "llm": "nope"}), 400)
    assert "'nope'" in llm


@pytest.fixture(scope="module")
def guarded(server_settings: Settings) -> Iterator[str]:
    """A second server over the same workspace that wants a token."""
    with serving(server_settings, token="s3cret-token") as url:
        yield url


def test_a_token_is_required_on_every_api_route(guarded: str, uploaded: dict[str, Any]) -> None:
    for path in ("/api/health", "/api/traces", "/api/traces/gpt_2rank/steps"):
        assert "token" in _one_line_error(httpx.get(f"{guarded}{path}"), 401)
        wrong = httpx.get(f"{guarded}{path}", headers={"Authorization": "Bearer s3cret-tokeN"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        ok = httpx.get(f"{guarded}{path}", headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200, ok.text
    refused = upload(guarded, GPT, name="no-token")
    assert refused.status_code == 401
    assert httpx.get(f"{guarded}/").status_code == 200  # the page loads; its calls carry the token
    schema = httpx.get(f"{guarded}/openapi.json").json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_a_graph_database_that_goes_down_is_503_and_the_server_goes_on(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", workers=2)
    try:
        with serving(settings) as url:
            assert httpx.get(f"{url}/api/traces").json() == {"traces": []}
            stop_server(settings.home)
            assert "FalkorDB" in _one_line_error(httpx.get(f"{url}/api/traces"), 503)
            assert httpx.get(f"{url}/api/health").status_code == 200
    finally:
        stop_server(settings.home)


def test_steps_and_timeline_give_the_gpu_timeline_of_a_gpu_trace(server: str, uploaded_gpu: dict[str, Any]) -> None:
    expected = analysis_to_dict(analyze(read_trace([QWEN])))["steps"][0]  # what `oracle analyze --json` says
    (row,) = httpx.get(f"{server}/api/traces/{uploaded_gpu['id']}/steps").json()["steps"]
    assert (row["step"], row["rank"]) == (expected["step"], expected["rank"]) and row["gpu_bound"] is True
    assert row["gpu"]["busy_ms"] == round(expected["gpu"]["busy_ms"], 3)
    assert row["gpu"]["idle_ms"] == round(expected["gpu"]["idle_ms"], 3)
    assert row["gpu"]["busy_pct"] == round(100 * expected["gpu"]["busy_ms"] / expected["gpu"]["total_ms"], 1)
    body = httpx.get(f"{server}/api/traces/{uploaded_gpu['id']}/steps/{row['step']}/timeline").json()
    (strip,) = body["gpu"]
    assert strip["rank"] == 0 and strip["busy_pct"] == row["gpu"]["busy_pct"]
    assert strip["busy_ms"] == pytest.approx(expected["gpu"]["busy_ms"], abs=1e-6)
    busy = strip["busy"]
    assert busy and all(strip["start_ms"] <= s < e <= strip["end_ms"] + 1e-4 for s, e in busy)
    assert all(e0 < s1 for (_, e0), (s1, _) in zip(busy, busy[1:]))  # disjoint, in order
    assert sum(e - s for s, e in busy) == pytest.approx(strip["busy_ms"], abs=1e-4 * len(busy))  # the union itself


def test_a_trace_without_gpu_events_has_no_gpu_values(server: str, uploaded: dict[str, Any]) -> None:
    rows = httpx.get(f"{server}/api/traces/gpt_2rank/steps").json()["steps"]
    assert all(r["gpu"] is None and r["gpu_bound"] is False for r in rows)
    assert httpx.get(f"{server}/api/traces/gpt_2rank/steps/5/timeline").json()["gpu"] == []


def _dumps(folder: Path) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (p.name, p.read_bytes(), "application/octet-stream"))
            for p in sorted(folder.glob("nccl_trace_rank_*"))]


def test_hang_reads_uploaded_dumps_as_oracle_hang_does(server: str, server_settings: Settings) -> None:
    from bottleneck_oracle.workspace.hang import hang_report

    folder = DATA / "hangs" / "skip"
    response = httpx.post(f"{server}/api/hang", files=_dumps(folder), timeout=120)
    assert response.status_code == 200, response.text
    body = response.json()
    expected = hang_report(folder, server_settings)
    assert {k: v for k, v in body.items() if k != "dumps"} == {k: v for k, v in expected.items() if k != "dumps"}
    assert body["culprit_ranks"] == [1] and body["first_divergence"]["kind"] == "op"


def test_hang_refuses_a_dump_that_would_run_code(server: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hostile = f"cos\nsystem\n(Vtouch {marker}\ntR.".encode()
    files = [("files", ("nccl_trace_rank_0", hostile, "application/octet-stream"))]
    response = httpx.post(f"{server}/api/hang", files=files, timeout=60)
    assert "refused: it names os.system" in _one_line_error(response, 400)
    assert not marker.exists()
    bad_name = [("files", ("rank 0;", b"x", "application/octet-stream"))]
    assert "nccl_trace_rank_0" in _one_line_error(httpx.post(f"{server}/api/hang", files=bad_name, timeout=60), 400)


def _op_table(folder: Path, *names: str) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (name, (folder / name).read_bytes(), "application/octet-stream")) for name in names]


def test_stragglers_reads_an_uploaded_op_table_as_oracle_stragglers_does(server: str,
                                                                         server_settings: Settings) -> None:
    from bottleneck_oracle.workspace.stragglers import straggler_report

    edits = ["fix straggler_rank rank=0", "even_microbatches"]
    response = httpx.post(f"{server}/api/stragglers", files=_op_table(STRAGGLERS / "AR", "trace.parquet", "meta.yaml"),
                          data={"whatif": edits}, timeout=120)
    assert response.status_code == 200, response.text
    body = response.json()
    expected = straggler_report(STRAGGLERS / "AR", server_settings, edits=edits)
    assert {k: v for k, v in body.items() if k != "job"} == {k: v for k, v in expected.items() if k != "job"}
    assert body["job"] == expected["job"] | {"source": "trace.parquet"}  # not where the server keeps it
    assert body["cause"] == "slow_worker" and body["heatmap"]["values"][0][0] == max(sum(body["heatmap"]["values"], []))
    assert [w["edits"] for w in body["whatif"]] == [[e] for e in edits]


def test_stragglers_takes_a_csv_with_its_layout_in_form_fields(server: str, tmp_path: Path) -> None:
    import pyarrow.csv
    import pyarrow.parquet

    pyarrow.csv.write_csv(pyarrow.parquet.read_table(STRAGGLERS / "ST" / "trace.parquet"), tmp_path / "st.csv")
    response = httpx.post(f"{server}/api/stragglers", files=_op_table(tmp_path, "st.csv"),
                          data={"dp": "2", "pp": "4"}, timeout=120)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["cause"] == "stage_imbalance" and body["worst_stage"] == 3 and body["job"]["name"] == "st"
    assert len(body["heatmap"]["values"]) == 2 and len(body["heatmap"]["values"][0]) == 4


def test_stragglers_bad_input_is_400_in_one_line_and_leaves_nothing(server: str, server_settings: Settings,
                                                                  tmp_path: Path) -> None:
    before = set((Path(server_settings.home) / UPLOADS).glob("*"))
    table = _op_table(STRAGGLERS / "ST", "trace.parquet")
    cases = [
        (table, {}, "send the op table's meta.yaml with it, or its layout in the dp and pp fields"),
        (table, {"dp": "2"}, "give both 'dp' and 'pp'"),
        (table, {"dp": "two", "pp": "4"}, "field 'dp': expected a positive integer, got 'two'"),
        (table, {"dp": "1048576", "pp": "4"}, "at most 1048576"),
        (table, {"dp": "2", "pp": "4", "whatif": "speed up everything"}, "speed up everything"),
        (table, {"dp": "2", "pp": "4", "whatif": "fix straggler_rank rank=37"}, "rank 37 records no ops"),
        (table, {"dp": "2", "pp": "4", "color": "red"}, "unexpected part 'color'"),
        ([("files", ("notes.txt", b"x", "text/plain"))], {}, "expected a file named like trace.parquet"),
        ([("files", ("trace.csv", b"\x00\x01 not a table", "text/csv"))], {"dp": "1", "pp": "1"}, "trace.csv: "),
        (_op_table(STRAGGLERS / "ST", "meta.yaml"), {}, "no .parquet or .csv op table"),
    ]
    for files, data, message in cases:
        response = httpx.post(f"{server}/api/stragglers", files=files, data=data, timeout=120)
        detail = _one_line_error(response, 400)
        assert message in detail and str(server_settings.home) not in detail, (message, detail)
    assert set((Path(server_settings.home) / UPLOADS).glob("*")) == before
    assert httpx.get(f"{server}/api/health").status_code == 200
