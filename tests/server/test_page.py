"""The page in a real headless Chromium against a real ``create_app`` server on 127.0.0.1: the shipped
example picked, its slow step marked, that step's timeline drawn with its critical path, a what-if
overlaid, the chat's answer read; a trace whose op names are markup shown as text with no script run;
and a check that the page's code has no HTML-string sink at all."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.whatif.run_verdict import run_verdict
from tests.conftest import DATA, REPO, STRAGGLERS
from tests.server.browser import ask as ask_chat
from tests.server.browser import (
    chromium,
    compare,
    count_pixels,
    open_page,
    pick_trace,
    read_hang,
    read_stragglers,
    run_whatif,
    slow_steps,
    upload_files,
)
from tests.server.browser import open_step as open_timeline_step
from tests.server.conftest import GPT, serving, upload
from tests.traces.test_flight_recorder import dump, entry, write

STATIC = REPO / "bottleneck_oracle" / "server" / "static"  # the page: index.html and its modules
SCRIPT_NAME = "<script>window.__xss=1</script>"
IMG_NAME = '<img src=x onerror="window.__xss=1">'
RENAMES = {"aten::select": SCRIPT_NAME, "aten::view": IMG_NAME}  # select is the culprit op the findings quote
OLD_PATH_RGB = (0xD4, 0xA0, 0x00)  # the gold of the recorded critical path (timeline.js OLD_PATH)
NEW_PATH_RGB = (0xD6, 0x24, 0x9F)  # the magenta of a what-if's critical path (timeline.js NEW_PATH)
SINKS = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser"
                   r"|srcdoc|\beval\s*\(|new\s+Function\b|setHTML")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    """The example's own analysis, read here: what the page must agree with."""
    return analyze(read_trace(GPT, workers=2))


def _slow_step_and_cause(a: Analysis) -> tuple[int, str]:
    step = a.slow_steps[0].step
    major = [f for f in a.findings if f.step == step and f.severity == "major"]
    return step, major[0].category.value


def _xss_copy(folder: Path) -> Path:
    """The example's rank files with op names rewritten into markup (a copy; the example is untouched)."""
    folder.mkdir()
    for src in sorted(GPT.glob("*.json.gz")):
        doc = json.loads(gzip.decompress(src.read_bytes()))
        for e in doc["traceEvents"]:
            if e.get("name") in RENAMES:
                e["name"] = RENAMES[e["name"]]
        (folder / src.name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    shutil.copy(GPT / "manifest.json", folder / "manifest.json")
    return folder


def test_page_static_code_has_no_html_sink() -> None:
    scripts = sorted(STATIC.glob("*.js"))
    assert {"app.js", "timeline.js", "api.js", "dom.js", "stepchart.js", "gpustrip.js", "compare.js"} <= {
        p.name for p in scripts}
    for p in scripts:
        for no, line in enumerate(p.read_text().splitlines(), 1):
            assert not SINKS.search(line), f"{p.name}:{no}: an HTML-string sink: {line.strip()}"
    html = (STATIC / "index.html").read_text()
    assert "Content-Security-Policy" in html and "script-src 'self'" in html
    # no inline script and no inline handler: the only scripts are the page's own modules
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="static/app.js">']
    assert not re.search(r"\son[a-z]+\s*=", html)
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "the page loads nothing from another host"


def test_page_slow_step_timeline_whatif_and_chat(browser: Any, server: str, uploaded: dict[str, Any],
                                                 analysis: Analysis) -> None:
    step, cause = _slow_step_and_cause(analysis)
    page, errors = open_page(browser, f"{server}/")
    pick_trace(page, uploaded["id"])
    assert slow_steps(page) == sorted({s.step for s in analysis.slow_steps}) == [step]
    # the run's verdict, word for word as oracle analyze states it
    assert page.text_content("#run-verdict") == run_verdict(analysis).headline()

    state = open_timeline_step(page, step, via_slow_mark=True)
    path = [r for r in analysis.steps if r.step == step]
    assert int(state["eventsDrawn"]) > 1000
    assert int(state["criticalDrawn"]) > 0 and max(len(r.path_nodes()) for r in path) > 0
    assert count_pixels(page, OLD_PATH_RGB) > 200, "the critical path's gold is on the canvas"
    assert "No GPU events in this trace" in page.text_content("#gpu-strip")  # a CPU-only capture
    assert page.eval_on_selector("#step-chart .col.selected", "n => n.dataset.step") == str(step)
    findings = page.eval_on_selector_all("#findings li[data-category]", "ns => ns.map(n => n.dataset.category)")
    assert cause in findings

    fixed = run_whatif(page, f"fix {cause}")
    assert fixed["state"] == "done", fixed["text"]
    baseline = max(r.wall_ns for r in path) / 1e6
    predicted = {k: float(v.split()[0]) for k, v in fixed["predicted"].items()}
    assert "replay" in predicted and predicted["replay"] < 0.5 * baseline, fixed
    state = page.eval_on_selector("#timeline", "c => ({...c.dataset})")
    assert int(state["overlay"]) > 0 and int(state["newCriticalDrawn"]) > 0
    page.wait_for_function("() => document.getElementById('timeline').dataset.newCriticalDrawn > 0")
    assert count_pixels(page, NEW_PATH_RGB) > 100, "the what-if's path is overlaid in magenta"

    bad = run_whatif(page, "make it faster")
    assert bad["state"] == "error" and "make it faster" in bad["text"]

    answer = ask_chat(page, f"why is step {step} slow?")
    assert answer["state"] == "done", answer
    assert answer["cause"] == cause and f"The cause is {cause}" in answer["answer"], answer
    assert any(t.startswith("→ explain_step(") and "✓" in t for t in answer["tools"]), answer["tools"]
    assert answer["verdict"].startswith(f"Step {step} is slow because") and answer["check"].startswith("oracle whatif")
    follow_up = ask_chat(page, "How much would that save?")  # the page's conversation goes on
    assert follow_up["state"] == "done" and follow_up["verdict"].startswith(f"With `fix {cause}`, step {step}")
    assert [t for t in follow_up["tools"] if t.startswith("→ whatif(")], follow_up["tools"]
    assert not errors, errors


def test_page_shows_markup_in_op_names_as_text(browser: Any, server: str, tmp_path: Path) -> None:
    response = upload(server, _xss_copy(tmp_path / "xss_names"), name="xss_names")
    assert response.status_code == 201, response.text
    trace = response.json()["trace"]
    page, errors = open_page(browser, f"{server}/")
    pick_trace(page, trace["id"])
    page.check("#findings-all")
    findings = page.inner_text("#findings")
    assert SCRIPT_NAME in findings, findings[:2000]

    step = slow_steps(page)[0]
    open_timeline_step(page, step)
    for name in (SCRIPT_NAME, IMG_NAME):
        point = page.evaluate("name => window.oracleTimeline.reveal(name)", name)
        assert point is not None, name
        page.mouse.move(point["x"], point["y"])
        page.wait_for_selector("#tooltip:not([hidden])")
        assert page.text_content("#tooltip .tt-name") == name
        page.mouse.move(0, 0)
        page.wait_for_selector("#tooltip", state="hidden")

    answer = ask_chat(page, f"why is step {step} slow?")
    assert answer["state"] == "done" and SCRIPT_NAME in answer["answer"], answer
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # the page's own module
    assert not errors, errors


def test_page_sends_the_token_of_its_url(browser: Any, server_settings: Any, uploaded: dict[str, Any]) -> None:
    with serving(server_settings, token="page-token-1") as url:
        page, _ = open_page(browser, f"{url}/")
        page.wait_for_function("() => document.getElementById('upload-error').textContent.length > 0")
        assert "token" in page.text_content("#upload-error")
        page.close()
        page, errors = open_page(browser, f"{url}/#token=page-token-1")
        pick_trace(page, uploaded["id"])
        assert page.text_content("#upload-error") == ""
        assert not errors, errors


def test_page_upload_shows_the_one_line_error_of_a_bad_file(browser: Any, server: str, tmp_path: Path) -> None:
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "x"')
    page, errors = open_page(browser, f"{server}/")
    page.wait_for_selector("body[data-ready='1'], #trace-picker option", state="attached")
    shown = upload_files(page, [bad])
    assert "rank0.json" in shown and "\n" not in shown, shown
    page.wait_for_selector("#trace-picker option", state="attached")
    assert page.evaluate("fetch('api/health').then(r => r.status)") == 200  # the server keeps running
    assert not errors, errors


def test_page_draws_the_gpu_utilization_strip_above_the_timeline(browser: Any, server: str,
                                                                  uploaded_gpu: dict[str, Any]) -> None:
    (row,) = httpx.get(f"{server}/api/traces/{uploaded_gpu['id']}/steps").json()["steps"]
    (strip,) = httpx.get(f"{server}/api/traces/{uploaded_gpu['id']}/steps/{row['step']}/timeline").json()["gpu"]
    page, errors = open_page(browser, f"{server}/")
    pick_trace(page, uploaded_gpu["id"])
    open_timeline_step(page, row["step"])
    shown = page.eval_on_selector("#gpu-strip .gpu-row[data-rank='0']", """r => ({
        pct: r.dataset.busyPct, label: r.querySelector('.gpu-label').textContent,
        busy: [...r.querySelectorAll('rect.gpu-busy')].map(x => [+x.getAttribute('x'), +x.getAttribute('width')]),
        width: r.querySelector('.gpu-bar').getBoundingClientRect().width,
        top: r.getBoundingClientRect().bottom <= document.getElementById('timeline').getBoundingClientRect().top})""")
    assert float(shown["pct"]) == row["gpu"]["busy_pct"] and f"{row['gpu']['busy_pct']}% busy" in shown["label"]
    assert shown["busy"] == [pytest.approx([s, e - s], abs=1e-3) for s, e in strip["busy"]]
    assert shown["width"] > 400 and shown["top"], "a wide strip, above the timeline"
    assert not errors, errors


def test_page_compares_two_runs(browser: Any, server: str, uploaded: dict[str, Any], uploaded_pair: dict[str, Any],
                                tmp_path: Path) -> None:
    doc = httpx.get(f"{server}/api/diff", params={"base": "pair_base", "new": "pair_stall"}, timeout=120).json()
    page, errors = open_page(browser, f"{server}/")
    shown = compare(page, uploaded_pair["base"]["id"], uploaded_pair["stall"]["id"])
    assert shown["state"] == "done", shown["error"]
    assert shown["verdict"].startswith(doc["headline"]) and "comparability high" in shown["verdict"]
    assert "`fix dataloader_stall` applied to NEW (pair_stall)" in shown["verdict"]
    assert f"Cause: {doc['cause']['words']}" in shown["verdict"]  # the diff's cause and each run's verdict
    assert f"NEW pair_stall: {doc['new_verdict']['headline']}" in shown["verdict"]
    # the chart: every steady step of both runs, at the API's values
    assert shown["points"] == {"base": doc["base"]["steady_ms"], "new": doc["new"]["steady_ms"]}
    assert shown["movers"][0][:2] == ["attribution", "data_loading"]
    assert ["finding (appeared)", "dataloader_stall on rank(s) 0"] in [m[:2] for m in shown["movers"]]

    # op names that are markup, compared against the names they replace: shown as text, no script run
    response = upload(server, _xss_copy(tmp_path / "xss_pair"), name="xss_pair")
    assert response.status_code == 201, response.text
    shown = compare(page, uploaded["id"], response.json()["trace"]["id"])
    assert shown["state"] == "done", shown["error"]
    names = [m[1] for m in shown["movers"]]
    # matched by normalized name: the <script> tags go as template brackets do; the img tag is all brackets, kept whole
    assert "window.__xss=1" in names and IMG_NAME in names, names
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.evaluate("document.querySelectorAll('#diff-movers img, #diff-movers script').length") == 0
    assert not errors, errors


def test_page_reads_a_hung_jobs_dumps_and_marks_the_rank_astray(browser: Any, server: str, tmp_path: Path) -> None:
    page, errors = open_page(browser, server)
    got = read_hang(page, sorted((DATA / "hangs" / "skip").glob("nccl_trace_rank_*")))
    assert got["state"] == "done" and got["verdict"].startswith("Hang: Rank 1 went astray")
    assert got["seqs"] == ["#1", "#2", "#3"] and got["stuck"] == "#3"
    assert got["rows"] == {"0": ["✓", "✓", "…"], "1": ["✓", "✓", "✗"], "2": ["✓", "✓", "…"],
                           "3": ["✓", "✓", "…"]}
    assert got["culprits"] == [1]
    # a call site that is markup is shown as text, and runs nothing
    calls = [entry(1), entry(2, done=False)]
    for call in calls:
        call["frames"][-1]["filename"] = f"/job/{SCRIPT_NAME}.py"
    folder = write(tmp_path / "markup", {r: dump(calls, "[0, 1, 2]") for r in (0, 1)})
    got = read_hang(page, sorted(folder.iterdir()))
    assert got["state"] == "done" and got["culprits"] == [2]  # the rank with no dump: it never came
    assert SCRIPT_NAME in page.text_content("#hang-result")
    assert page.evaluate("window.__xss") is None
    bad = tmp_path / "bad" / "nccl_trace_rank_0"
    bad.parent.mkdir()
    bad.write_bytes(b"\x80\x04truncated")
    got = read_hang(page, [bad])
    assert got["state"] == "error" and "no readable Flight Recorder dump" in got["error"]
    assert errors == []


def test_page_reads_a_pipeline_jobs_stragglers_and_draws_the_heatmap(browser: Any, server: str,
                                                                       tmp_path: Path) -> None:
    page, errors = open_page(browser, server)
    job = STRAGGLERS / "AR"
    files = [job / "trace.parquet", job / "meta.yaml"]
    report = httpx.post(f"{server}/api/stragglers", data={"whatif": "fix straggler_rank rank=0"}, timeout=120, files=[
        ("files", (f.name, f.read_bytes(), "application/octet-stream")) for f in files]).json()
    got = read_stragglers(page, files, whatif=("fix straggler_rank rank=0",))
    assert got["state"] == "done" and got["headline"] == f"Slow worker: {report['headline']}"
    assert "rank 0 (dp_rank 0, stage 0)" in got["headline"] and "S = 1.973" in got["headline"]
    (w,) = report["whatif"]
    lo, hi = w["interval_s"]
    assert got["whatifs"] == [f"What if fix straggler_rank rank=0: a step of {w['predicted_step_s']:.3f} s (interval "
                              f"{lo:.3f} to {hi:.3f} s), saving {w['saving_s']:.3f} s ({w['saving_pct']}%)"]
    fix = report["fixes"][0]
    assert got["fixes"][0].startswith("Fix: replace or drain rank 0")
    assert f"interval {fix['interval_s'][0]:.3f} to {fix['interval_s'][1]:.3f} s" in got["fixes"][0]
    assert got["dps"] == ["0", "1", "2", "3"] and got["stages"] == ["0", "1", "2", "3"]  # DP across, stages down
    values = report["heatmap"]["values"]  # [dp][stage]
    assert got["cells"]["0"] == [f"{values[dp][0]:.3f}" for dp in range(4)] and got["cells"]["0"][0] == "1.973"
    assert got["hottest"] == [[0, 0]]
    hot = got["colors"]["0,0"]
    assert hot[0] > 200 and hot[1] < 60 and hot[2] < 60  # the slowest worker red
    assert all(c[1] > 200 for k, c in got["colors"].items() if k != "0,0")  # the rest near white
    # a job named with markup is shown as text, and runs nothing
    folder = tmp_path / "markup"
    folder.mkdir()
    shutil.copy(STRAGGLERS / "ST" / "trace.parquet", folder / "trace.parquet")
    meta = (STRAGGLERS / "ST" / "meta.yaml").read_text().replace("trial_name: ST", f"trial_name: '{SCRIPT_NAME}'")
    (folder / "meta.yaml").write_text(meta)
    got = read_stragglers(page, [folder / "trace.parquet", folder / "meta.yaml"])
    assert got["state"] == "done" and got["headline"].startswith("Stage imbalance: Stage 3 is the long stage")
    assert got["stages"] == ["0", "1", "2", "3"] and got["dps"] == ["0", "1"] and got["hottest"] == [[1, 3]]
    assert SCRIPT_NAME in got["job"] and page.evaluate("window.__xss") is None
    # no layout: the server's one line, shown
    got = read_stragglers(page, [folder / "trace.parquet"])
    assert got["state"] == "error" and "meta.yaml" in got["error"] and "dp and pp" in got["error"]
    got = read_stragglers(page, [folder / "trace.parquet"], dp=2, pp=4)  # or the sizes in the form
    assert got["state"] == "done" and got["hottest"] == [[1, 3]]
    assert errors == []
