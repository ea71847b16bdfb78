"""Debian's headless chromium driven by Playwright (``executable_path``: no browser download), and the
page's steps as a person takes them: pick a trace, open a step, run a what-if, ask. Shared by the
page's tests, ``benchmarks/bench_page.py`` and ``tools/page_screenshot.py``.

Every wait is for a selector or a DOM attribute the page sets when it is done, never a fixed sleep.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, Request, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
TIMEOUT_MS = 90_000  # 2 cores shared with other tests: generous, and only ever a ceiling
ASK_TIMEOUT_MS = 300_000  # the first question loads the agent and its embedding model


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless /usr/bin/chromium; closed on exit.

    Raises:
        RuntimeError: chromium is not installed (``make setup`` installs Debian's).
    """
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM}: not installed; `make setup` installs Debian's chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def _streamed(request: Request) -> bool:
    """A server-sent event stream that arrived whole: Chromium reports a fetch body read through a
    ReadableStream as aborted once the stream closes, though the page read every event."""
    response = request.response()
    return (request.failure == "net::ERR_ABORTED" and response is not None and response.status == 200
            and response.headers.get("content-type", "").startswith("text/event-stream"))


def open_page(browser: Browser, url: str, *, width: int = 1400, height: int = 1150) -> tuple[Page, list[str]]:
    """A new page at ``url`` and the list its failures collect into: uncaught script errors, console
    errors other than the browser's own line for a 4xx response (the page shows those), responses
    of 500 and above, and requests that failed."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}")
            if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    page.on("requestfailed", lambda r: None if _streamed(r) else errors.append(f"failed: {r.url} {r.failure}"))
    page.goto(url)
    return page, errors


def pick_trace(page: Page, trace_id: str) -> None:
    """Chooses the trace in the header's picker and waits until its steps and findings are shown."""
    page.wait_for_selector(f"#trace-picker option[value='{trace_id}']", state="attached")
    page.select_option("#trace-picker", trace_id)
    page.wait_for_selector(f"body[data-trace='{trace_id}'][data-ready='1']")
    page.wait_for_selector("#step-chart .col", state="attached")


def slow_steps(page: Page) -> list[int]:
    """The steps the chart marks slow."""
    marks = page.eval_on_selector_all("#step-chart [data-slow-step]", "ns => ns.map(n => n.dataset.slowStep)")
    return sorted(int(s) for s in marks)


def timeline_state(page: Page) -> dict[str, str]:
    """The timeline canvas's data attributes (rendered, step, eventsDrawn, criticalDrawn, ...)."""
    return page.eval_on_selector("#timeline", "c => ({...c.dataset})")


def open_step(page: Page, step: int, *, via_slow_mark: bool = False) -> dict[str, str]:
    """Clicks the step in the chart (its "slow" label, or its column) and waits for the timeline's
    first frame of that step; returns the canvas's data attributes."""
    page.eval_on_selector("#timeline", "c => { c.dataset.rendered = '0'; }")
    if via_slow_mark:
        page.click(f"#step-chart [data-slow-step='{step}'] .slow-label")
    else:
        page.click(f"#step-chart .col[data-step='{step}']", position={"x": 2, "y": 2})
    page.wait_for_selector(f"#timeline[data-rendered='1'][data-step='{step}']")
    return timeline_state(page)


def run_whatif(page: Page, edit: str) -> dict[str, Any]:
    """Runs one what-if edit; returns {"state", "predicted": {predictor: text}, "text"}."""
    page.eval_on_selector("#whatif-result", "n => { n.dataset.state = ''; }")
    page.fill("#whatif-edit", edit)
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-result[data-state='done'], #whatif-result[data-state='error']")
    return page.eval_on_selector("#whatif-result", """n => ({state: n.dataset.state, text: n.textContent,
        predicted: Object.fromEntries([...n.querySelectorAll('tr[data-predictor]')].map(
            r => [r.dataset.predictor, r.querySelector('.predicted').textContent]))})""")


def ask(page: Page, question: str) -> dict[str, Any]:
    """Asks in the chat panel; returns {"state", "answer", "cause", "verdict", "check", "tools": [tool lines
    as shown]}."""
    page.eval_on_selector("#chat-answer", "n => { n.dataset.state = ''; }")
    page.fill("#chat-input", question)
    page.click("#chat-send")
    page.wait_for_selector("#chat-answer[data-state='done'], #chat-answer[data-state='error']",
                           timeout=ASK_TIMEOUT_MS)
    return page.evaluate("""() => { const a = document.getElementById('chat-answer');
        const part = (sel) => { const n = a.querySelector(sel); return n ? n.textContent : null; };
        return {state: a.dataset.state, answer: a.textContent, cause: a.dataset.cause || null,
                verdict: part('.verdict'), check: part('code'),
                tools: [...document.querySelectorAll('#chat-tools li[data-tool]')].map(li => li.textContent)}; }""")


def upload_files(page: Page, files: list[Path]) -> str:
    """Uploads ``files`` with the header's form; returns the one-line error shown, or "" on success."""
    page.eval_on_selector("#upload-status", "n => { n.textContent = ''; }")
    page.set_input_files("#upload-files", [str(f) for f in files])
    page.click("#upload-send")
    page.wait_for_function("""() => document.getElementById('upload-error').textContent
        || document.getElementById('upload-status').textContent.startsWith('added')""")
    return page.text_content("#upload-error") or ""


def count_pixels(page: Page, rgb: tuple[int, int, int], tolerance: int = 24) -> int:
    """How many pixels of the timeline canvas are within ``tolerance`` of ``rgb``: what was drawn."""
    return page.eval_on_selector("#timeline", """(c, [r, g, b, tol]) => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - r) <= tol && Math.abs(d[i + 1] - g) <= tol && Math.abs(d[i + 2] - b) <= tol) n++;
        return n; }""", [*rgb, tolerance])


def compare(page: Page, base_id: str, new_id: str) -> dict[str, Any]:
    """Compares two traces in the comparison view; returns {"state", "verdict", "error", "points":
    {run: [ms, ...]}, "movers": [[what, name, base, new, change], ...]}."""
    page.wait_for_selector("#diff-form[data-ready='1']", state="attached")
    for picker, trace in (("#diff-base", base_id), ("#diff-new", new_id)):
        page.focus(picker)  # as a click on it does: the list is read again (a trace may have been uploaded)
        page.wait_for_selector(f"{picker} option[value='{trace}']", state="attached")
        page.select_option(picker, trace)
    page.eval_on_selector("#diff-result", "n => { n.dataset.state = ''; }")
    page.click("#diff-run")
    page.wait_for_selector("#diff-result[data-state='done'], #diff-result[data-state='error']")
    return page.evaluate("""() => ({
        state: document.getElementById('diff-result').dataset.state,
        verdict: document.getElementById('diff-verdict').textContent,
        error: document.getElementById('diff-error').textContent,
        points: Object.fromEntries(['base', 'new'].map(k => [k, [...document.querySelectorAll(
            `#diff-chart circle[data-run='${k}']`)].map(c => +c.dataset.ms)])),
        movers: [...document.querySelectorAll('#diff-movers tr[data-what]')].map(
            r => [...r.querySelectorAll('td')].map(td => td.textContent))})""")


def read_hang(page: Page, files: list[Path]) -> dict[str, Any]:
    """Uploads Flight Recorder dumps in the hang view; returns {"state", "verdict", "error", "seqs": [column
    heads], "stuck": the marked head, "rows": {rank: [marks]}, "culprits": [ranks whose row is marked]}."""
    page.eval_on_selector("#hang-result", "n => { n.dataset.state = ''; }")
    page.set_input_files("#hang-files", [str(f) for f in files])
    page.click("#hang-send")
    page.wait_for_selector("#hang-result[data-state='done'], #hang-result[data-state='error']")
    return page.evaluate("""() => {
        const grid = document.getElementById('hang-grid');
        const heads = grid ? [...grid.querySelectorAll('tr:first-of-type th')].slice(1) : [];
        return {state: document.getElementById('hang-result').dataset.state,
                verdict: (document.getElementById('hang-verdict') || {}).textContent || null,
                error: document.getElementById('hang-error').textContent,
                seqs: heads.map(th => th.textContent),
                stuck: (heads.find(th => th.classList.contains('stuck')) || {}).textContent || null,
                rows: Object.fromEntries([...(grid ? grid.querySelectorAll('tr[data-rank]') : [])].map(
                    tr => [tr.dataset.rank, [...tr.querySelectorAll('td')].map(td => td.textContent)])),
                culprits: [...(grid ? grid.querySelectorAll('tr.culprit') : [])].map(tr => +tr.dataset.rank)}; }""")


def read_stragglers(page: Page, files: list[Path], *, dp: int | None = None, pp: int | None = None,
                    whatif: tuple[str, ...] = ()) -> dict[str, Any]:
    """Uploads a pipeline job's op table in the stragglers view; returns {"state", "headline", "job", "error",
    "fixes", "whatifs": [item texts], "dps": [column heads], "stages": [row heads], "cells": {stage: [texts]},
    "hottest": [[dp, stage]] of the marked cells, "colors": {"dp,stage": [r, g, b]}}."""
    page.eval_on_selector("#stragglers-result", "n => { n.dataset.state = ''; }")
    page.set_input_files("#stragglers-files", [str(f) for f in files])
    page.fill("#stragglers-dp", "" if dp is None else str(dp))
    page.fill("#stragglers-pp", "" if pp is None else str(pp))
    page.fill("#stragglers-whatif", "\n".join(whatif))
    page.click("#stragglers-send")
    page.wait_for_selector("#stragglers-result[data-state='done'], #stragglers-result[data-state='error']")
    return page.evaluate("""() => {
        const text = (id) => (document.getElementById(id) || {}).textContent || null;
        const heat = document.getElementById('stragglers-heat');
        const rows = heat ? [...heat.querySelectorAll('tr[data-stage]')] : [];
        const rgb = (td) => getComputedStyle(td).backgroundColor.match(/\\d+/g).map(Number);
        return {state: document.getElementById('stragglers-result').dataset.state,
                headline: text('stragglers-headline'), job: text('stragglers-job'),
                error: document.getElementById('stragglers-error').textContent,
                fixes: [...document.querySelectorAll('#stragglers-fixes li')].map(li => li.textContent),
                whatifs: [...document.querySelectorAll('#stragglers-whatifs li')].map(li => li.textContent),
                dps: heat ? [...heat.querySelectorAll('tr:first-of-type th')].slice(1).map(th => th.textContent) : [],
                stages: rows.map(tr => tr.querySelector('th').textContent),
                cells: Object.fromEntries(rows.map(tr => [tr.dataset.stage,
                    [...tr.querySelectorAll('td')].map(td => td.textContent)])),
                hottest: [...(heat ? heat.querySelectorAll('td.hottest') : [])].map(
                    td => [+td.dataset.dp, +td.closest('tr').dataset.stage]),
                colors: Object.fromEntries(rows.flatMap(tr => [...tr.querySelectorAll('td')].map(
                    td => [`${td.dataset.dp},${tr.dataset.stage}`, rgb(td)])))}; }""")
